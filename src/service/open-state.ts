// Opening what the service keeps before anything runs: the data directory made private and locked, the store
// (SQLite or PostgreSQL) with its migrations, the stores of the features, and the host's GPUs. A data directory the
// service cannot write is said as such, with what to do.

import { existsSync } from "node:fs";
import { join } from "node:path";
import { UserError, errorMessage } from "../errors.js";
import { sweepUploads } from "./deploy/upload.js";
import { openServiceStorage, type ServiceStorage } from "./stores.js";
import { redactStoreUrl } from "./store/url.js";
import { Secrets } from "./secrets/index.js";
import { resealRegistryAuths } from "./management/registry-auths.js";
import { SECRETS_KEY_FILE, SecretBox, loadSecretKeys } from "./secrets/box.js";
import { Management } from "./management/index.js";
import { lockDataDir } from "./store/data-lock.js";
import { secureDataDir } from "./store/private-files.js";
import { HostGpus } from "../gpus/host.js";
import { readInventory } from "../gpus/inventory.js";
import { hostGpuTypes } from "./management/datacenters.js";
import { describeStorage, storageCause } from "./store/faults.js";
import type { ServiceOptions } from "./options.js";

/**
 * Read this host's GPUs (once now, then every few seconds for utilization and memory, and on demand). The host
 * data center offers the type ids its GPUs satisfy, unless the operator set them (SVC_GPU_TYPES, or the data
 * centers given): those stay, as an override.
 */
export async function readHostGpus(management: Management, options: ServiceOptions, log: (message: string) => void): Promise<HostGpus> {
  const config = management.context.dataCenters;
  const override = hostGpuTypes(config);
  const offer = (gpus: HostGpus) => {
    if (override.length > 0) return;
    const typeIds = gpus.typeIds();
    config.dataCenters = config.dataCenters.map((d) => (d.id === config.host ? { ...d, gpuTypes: typeIds } : d));
  };
  const gpus: HostGpus = new HostGpus({
    read: options.gpus?.read ?? (() => readInventory()),
    override,
    sampleMs: options.gpus?.sampleMs,
    log,
    onChange: () => {
      // The first read is before the management API is attached: it plans REST endpoints with what it found.
      if (!started) return;
      offer(gpus);
      // REST endpoints waiting for a type this host now has (or no longer has) are planned again.
      void management.appChanged().catch((err: unknown) => log(`could not refresh REST endpoints after the GPUs changed: ${errorMessage(err)}`));
    },
  });
  let started = false;
  const inventory = await gpus.refresh();
  started = true;
  offer(gpus);
  if (inventory.gpus.length > 0) {
    log(`${inventory.gpus.length} GPU(s) on this host, each given to one worker at a time: ${inventory.gpus.map((g) => `${g.index} ${g.name}`).join(", ")}`);
  } else {
    // Said once at start: a GPU endpoint deployed here still runs, on the CPU (deploys and the endpoint page say so too).
    const why = gpus.readError ? `nvidia-smi failed: ${gpus.readError}` : "no nvidia-smi on PATH, or it lists none";
    log(`no GPU on this host (${why}): the workers of GPU endpoints run on its CPU`);
  }
  gpus.startSampling();
  return gpus;
}
/** At start, a data directory the service cannot write is a clear error naming it and what to do. */
export function unwritable<T>(dataDir: string, open: () => T): T {
  try {
    return open();
  } catch (err) {
    throw unwritableError(dataDir, err);
  }
}
export async function unwritableAsync<T>(dataDir: string, open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (err) {
    throw unwritableError(dataDir, err);
  }
}
export function unwritableError(dataDir: string, err: unknown): unknown {
  if (err instanceof UserError) return err;
  const cause = storageCause(err) ?? ((err as { code?: string }).code === "EACCES" ? "read-only" : undefined);
  if (cause === undefined) return err;
  return new UserError(
    `The service cannot write its data directory ${dataDir}: ${describeStorage(cause).replace("The service's storage", "it")} (${errorMessage(err)})`,
    {
      hint:
        cause === "full"
          ? "Free space on that filesystem, or pass another --data-dir."
          : "Make it writable by this user, or pass another --data-dir (SVC_DATA_DIR).",
      cause: err,
    },
  );
}
/** What the service keeps, opened: the storage, and the secrets readable with the current key. */
export interface OpenedState {
  storage: ServiceStorage;
  secrets: Secrets;
  /** What seals secrets at rest (users' secrets, webhook signing secrets). */
  box: SecretBox;
  /** Close the storage and release the data directory's lock. */
  close(): Promise<void>;
}
/**
 * Make the data directory the service's own and lock it, open the storage and the secrets (resealing those under
 * an earlier key), and refuse a store of several users where one is required. What was opened is closed again,
 * and the lock released, when a later step fails.
 */
export async function openState(options: ServiceOptions, log: (message: string) => void): Promise<OpenedState> {
  // Before anything is opened there: what the service keeps is its own (private-files.ts).
  await unwritableAsync(options.dataDir, () => secureDataDir(options.dataDir, { sqlite: !options.storeUrl }));
  const dataLock = unwritable(options.dataDir, () => lockDataDir(options.dataDir));
  let storage: ServiceStorage | undefined;
  try {
    storage = await unwritableAsync(options.dataDir, () => openServiceStorage({ dataDir: options.dataDir, storeUrl: options.storeUrl }));
    if (storage.kind === "postgres") log(`state kept in PostgreSQL at ${redactStoreUrl(options.storeUrl!)}`);
    // Uploads a crashed process left half-written: nothing refers to them.
    const swept = await sweepUploads(options.dataDir);
    if (swept > 0) log(`removed ${swept} unfinished upload(s) left by an earlier run`);
    const box = new SecretBox(loadSecretKeys(options.dataDir, options.secretsKeys));
    const secrets = new Secrets(storage.secrets, box, log);
    if (options.secretsKeys?.file && existsSync(join(options.dataDir, SECRETS_KEY_FILE))) {
      log(
        `the secrets key is read from ${options.secretsKeys.file}, but ${join(options.dataDir, SECRETS_KEY_FILE)} is still there: once it is no longer needed (its key is the file's, or SVC_SECRETS_KEY_PREVIOUS), remove it so copies of the data directory do not hold a key`,
      );
    }
    const resealed = await secrets.rotate();
    if (resealed > 0) log(`sealed ${resealed} secret(s) again under the current secrets key`);
    const resealedAuths = await resealRegistryAuths(storage.management, box, log);
    if (resealedAuths > 0) log(`sealed ${resealedAuths} registry auth(s) again under the current secrets key`);
    if (options.singleUser) {
      const users = (await storage.management.keyUsers?.()) ?? [];
      if (users.length > 1) {
        throw new UserError(
          `This service holds keys of ${users.length} users (${users.join(", ")}), and ${options.singleUser}: one tenant's worker could read another's data`,
          {
            hint: "Install bubblewrap (apt-get install bubblewrap) so that process workers run sandboxed (SVC_SANDBOX=auto), run Docker workers (--workers docker), or pass --single-tenant if every user here is the same tenant.",
          },
        );
      }
    }
    const opened = storage;
    return {
      storage,
      secrets,
      box,
      close: async () => {
        await opened.close();
        dataLock.release();
      },
    };
  } catch (err) {
    await storage?.close();
    dataLock.release();
    throw err;
  }
}
