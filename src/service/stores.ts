// Where the service keeps its state: the embedded SQLite file in the data directory (the default), or a
// PostgreSQL database (`--store postgres://...`, SVC_STORE_URL) that several replicas can share. Either way the
// service gets the same three stores: the job engine's batched one, the management records, sealed secrets.

import { join } from "node:path";
import { UserError, errorMessage } from "../errors.js";
import { openSqliteStore } from "./store/sqlite.js";
import { SQLITE_MIGRATIONS } from "./schema/sqlite.js";
import { PG_MIGRATIONS } from "./schema/postgres.js";
import { openPostgresManagementStore, openSqliteManagementStore, type ManagementStore } from "./management/store.js";
import { openPostgresSecretStore, openSqliteSecretStore, type SecretStore } from "./secrets/store.js";
import { openPostgresVolumeKeyStore, openSqliteVolumeKeyStore, type VolumeKeyStore } from "./volumes/key-store.js";
import { openPostgresIdempotencyStore, openSqliteIdempotencyStore, type IdempotencyStore } from "./idempotency/store.js";
import { openPostgresUsageStore, openSqliteUsageStore, type UsageStore } from "./metrics/usage-store.js";
import { redactStoreUrl } from "./store/url.js";
import { storageCause } from "./store/faults.js";
import type { JobCommands, Store } from "./store/types.js";
import type { RateLimiting, RateWindow } from "./keys/ratelimit.js";
import { localArtifacts, postgresArtifacts, type ArtifactStore } from "./artifacts/store.js";
import type { Queryable } from "./store/queryable.js";

export interface ServiceStorage {
  kind: "sqlite" | "postgres";
  /** Rate limits as one quota for every replica on this storage; undefined: each process counts its own. */
  sharedLimiter?(windows: RateWindow[], onError: (err: unknown) => void): RateLimiting & { stop(): Promise<void> };
  store: Store & JobCommands;
  management: ManagementStore;
  secrets: SecretStore;
  /** Which job each Idempotency-Key made. */
  idempotency: IdempotencyStore;
  /** Worker-seconds, GPU-seconds and jobs by user, endpoint and hour (metrics/usage.ts). */
  usage: UsageStore;
  /** Access keys of the S3 API on network volumes (volumes/key-store.ts). */
  volumeKeys: VolumeKeyStore;
  /** The database replicas coordinate through (leases), when they share one. */
  coordination?: Queryable;
  /** Where build artifacts are kept for every replica (artifacts.ts). */
  artifacts: ArtifactStore;
  /** Read the management records and secrets again (what another replica wrote). */
  reload(): Promise<void>;
  close(): Promise<void>;
}

export async function openServiceStorage(options: { dataDir: string; storeUrl?: string }): Promise<ServiceStorage> {
  if (!options.storeUrl) {
    const file = join(options.dataDir, "svc.sqlite");
    const store = openSqliteStore(file, SQLITE_MIGRATIONS);
    let management: ManagementStore | undefined;
    try {
      management = openSqliteManagementStore(file);
      const secrets = openSqliteSecretStore(file);
      const idempotency = openSqliteIdempotencyStore(file);
      const volumeKeys = openSqliteVolumeKeyStore(file);
      const usage = openSqliteUsageStore(file);
      return {
        kind: "sqlite",
        store,
        artifacts: localArtifacts,
        management,
        secrets,
        idempotency,
        volumeKeys,
        usage,
        // One process per data directory: nobody else writes these tables.
        reload: async () => undefined,
        async close() {
          idempotency.close();
          usage.close();
          volumeKeys.close();
          secrets.close();
          management!.close();
          await store.close();
        },
      };
    } catch (err) {
      management?.close();
      await store.close();
      throw err;
    }
  }
  // Loaded only when asked for: the embedded default (and `svc dev`) never pay for the PostgreSQL client.
  const { openPostgresStore } = await import("./store/postgres/index.js");
  const { SharedRateLimiter } = await import("./cluster/shared-rate-limiter.js");
  let store: Awaited<ReturnType<typeof openPostgresStore>>;
  try {
    store = await openPostgresStore(options.storeUrl, PG_MIGRATIONS);
  } catch (err) {
    const cause = storageCause(err);
    throw new UserError(`The service cannot open its database ${redactStoreUrl(options.storeUrl)}: ${errorMessage(err)}`, {
      hint:
        cause === "unavailable" || (err as { code?: string }).code === "ENOTFOUND"
          ? "Check that PostgreSQL runs and answers at that address (host, port, database, user), then start again."
          : "Check the URL's database, user and password, and that this user may create tables in it.",
      cause: err,
    });
  }
  try {
    const management = await openPostgresManagementStore(store.db);
    const secrets = await openPostgresSecretStore(store.db);
    return {
      kind: "postgres",
      store,
      coordination: store.db,
      artifacts: postgresArtifacts({ dataDir: options.dataDir, db: store.db, transaction: store.transaction }),
      management,
      secrets,
      idempotency: openPostgresIdempotencyStore(store.db),
      volumeKeys: openPostgresVolumeKeyStore(store.db),
      usage: openPostgresUsageStore(store.db),
      reload: async () => {
        await Promise.all([management.reload(), secrets.reload()]);
      },
      sharedLimiter: (windows, onError) => new SharedRateLimiter(windows, { db: store.db, onError }),
      close: () => store.close(),
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
