// The pool of pre-booted worker containers a Docker driver keeps (docs/cold-start.md): booting them on the pool's
// network, replacing those that end before a claim (until they keep failing), handing one out to a cold start,
// and removing them at close. The claim itself (making a pool container an endpoint's worker) is docker-claim.ts's,
// called by the driver (docker.ts), which owns the workers; the pure parts (which launch may claim, the claim's
// environment, the artifact cache) are in docker-pool.ts.

import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { errorMessage } from "../errors.js";
import { dockerMessage, dockerNamePart, dockerStatus, LABELS } from "./docker-engine.js";
import { poolArtifactsDir } from "./docker-host.js";
import { pipeLogs } from "./docker-logs.js";
import { ArtifactCache, poolContainerOptions, poolLabels, poolSizes, removeArtifactsDir } from "./docker-pool.js";
import type { GpuSupport } from "./docker-spec.js";
import type { WorkerImageKind } from "./image-names.js";
import type { ContainerLimits } from "./isolation.js";
import { POOL_READY_LINE } from "../runtime/claim.js";
import type { WorkerLogLine } from "./types.js";

/** A pre-booted worker container: waiting for a claim on its stdin (the attachment the driver holds). */
export interface PooledContainer {
  name: string;
  kind: WorkerImageKind;
  /** The network it was started on. */
  network: string;
  container: Docker.Container;
  /** The attachment: stdin for the claim, stdout and stderr multiplexed. */
  stream: NodeJS.ReadWriteStream;
  streamsDone: Promise<void>;
  /** The engine's wait: its exit status. */
  status: Promise<{ StatusCode: number }>;
  /** True once its runtime is loaded and waits; false when it failed or ended first. */
  ready: Promise<boolean>;
  isReady?: boolean;
  /** Where its output goes: the pool's note-taker before a claim, the worker's log after. */
  sink: { onLog?: (line: WorkerLogLine) => void };
}

/** What the pool takes from its driver: the driver's settings, and its engine, images and networks (memoized there). */
export interface ContainerPoolDeps {
  /** The pool's size per image kind (DockerDriverOptions.pool), extra labels and the artifact cache's place. */
  options: { pool?: number | Partial<Record<WorkerImageKind, number>>; artifactCacheDir?: string; labels?: Record<string, string> };
  session: string;
  runtime: string | undefined;
  limits: ContainerLimits;
  log: (message: string) => void;
  engine: () => Promise<Docker>;
  imageFor: (kind: WorkerImageKind) => Promise<string>;
  networkFor: (name: string, launch: undefined) => Promise<{ name: string; gateway: string }>;
  /** The network pool containers wait on. */
  poolNetworkName: string;
  /** The host's GPUs, detected once per driver. */
  gpuSupport: () => Promise<GpuSupport>;
  /** Whether the driver is closing: nothing more is booted. */
  isClosed: () => boolean;
}

/** The driver's pool, or undefined when it has none (no size, or a runtime under which a claim cannot work). */
export function createContainerPool(deps: ContainerPoolDeps) {
  const { options, session, runtime, limits, log, engine, imageFor, networkFor, poolNetworkName } = deps;
  const wanted = options.pool;
  if (wanted === undefined || wanted === 0 || (typeof wanted === "object" && !wanted.cpu && !wanted.gpu)) return undefined;
  // A claim sets the endpoint's memory and CPU on the running container (docker update), which only runc does.
  if (runtime && runtime !== "runc") {
    log(`no pre-booted worker containers under runtime ${runtime}: it cannot change a running container's limits, which a claim sets`);
    return undefined;
  }
  const artifactCacheDir = options.artifactCacheDir ?? poolArtifactsDir(session);
  const artifacts = new ArtifactCache(artifactCacheDir, randomBytes(32));
  const ready: Record<WorkerImageKind, PooledContainer[]> = { cpu: [], gpu: [] };
  /** Names of the pool's containers, from before they exist: adopt() leaves them alone. */
  const names = new Set<string>();
  let sizes: Record<WorkerImageKind, number> = { cpu: 0, gpu: 0 };
  let failures = 0;

  const boot = (kind: WorkerImageKind): PooledContainer => {
    const name = `svc-pool-${dockerNamePart(session, 24)}-${kind}-${randomBytes(4).toString("hex")}`;
    names.add(name);
    const early: string[] = [];
    let readyLine: (ok: boolean) => void = () => undefined;
    const entry = { name, kind, network: poolNetworkName, sink: {} } as PooledContainer;
    entry.sink.onLog = (line) => {
      if (line.text === POOL_READY_LINE) return readyLine(true);
      // What it said before any claim: shown if it dies before use.
      if (early.length < 20) early.push(line.text);
    };
    entry.ready = (async () => {
      const docker = await engine();
      const [image, network] = await Promise.all([imageFor(kind), networkFor(poolNetworkName, undefined), artifacts.ensureDir()]);
      const container = await docker.createContainer(
        poolContainerOptions({
          name,
          image,
          network: network.name,
          kind,
          labels: poolLabels(session, kind, options.labels),
          artifactCache: artifacts.dir,
          requestGpus: kind === "gpu",
          serviceHostIp: network.gateway,
          limits,
        }),
      );
      entry.container = container;
      const ok = new Promise<boolean>((resolve) => (readyLine = resolve));
      entry.stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as NodeJS.ReadWriteStream;
      entry.streamsDone = pipeLogs(docker, entry.stream, (line) => entry.sink.onLog?.(line));
      await container.start();
      entry.status = container.wait() as Promise<{ StatusCode: number }>;
      void entry.status.then(
        () => exitedUnclaimed(entry, early),
        () => exitedUnclaimed(entry, early),
      );
      void entry.status.then(
        () => readyLine(false),
        () => readyLine(false),
      );
      return ok;
    })().catch((err: unknown) => {
      log(`could not start a pre-booted worker container: ${errorMessage(err)}`);
      if (entry.container) void entry.container.remove({ force: true }).catch(() => undefined /* best effort: close() removes what this session left */);
      exitedUnclaimed(entry, early);
      return false;
    });
    void entry.ready.then((ok) => {
      entry.isReady = ok;
      if (ok) failures = 0;
    });
    return entry;
  };

  /** A pool container ended before any claim: replaced, unless that keeps happening. */
  const exitedUnclaimed = (entry: PooledContainer, early: string[]) => {
    names.delete(entry.name);
    const list = ready[entry.kind];
    const i = list.indexOf(entry);
    if (i < 0) return;
    list.splice(i, 1);
    if (deps.isClosed()) return;
    if (++failures === 3) log(`pre-booted worker containers keep exiting before use; the pool stops refilling. Last output:\n${early.join("\n")}`);
    refill();
  };

  const refill = () => {
    for (const kind of ["cpu", "gpu"] as const) {
      while (!deps.isClosed() && failures < 3 && ready[kind].length < sizes[kind]) ready[kind].push(boot(kind));
    }
  };

  // Pool containers that ended but stayed (the engine removes them when they exit; not when it failed to, or
  // when a run was killed between creating one and starting it): any session's that ended, this session's that
  // never started (another live service's may be just about to start).
  const reap = async () => {
    const docker = await engine();
    const stopped = await docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`, `${LABELS.pool}=true`], status: ["created", "exited", "dead"] },
    });
    for (const info of stopped.filter((c) => c.State !== "created" || c.Labels[LABELS.session] === session)) {
      await docker
        .getContainer(info.Id)
        .remove({ force: true })
        .catch((err: unknown) => {
          if (dockerStatus(err) !== 404) throw err;
        });
    }
  };

  const started = (async () => {
    const wantsGpu = typeof wanted === "number" ? wanted > 0 : (wanted.gpu ?? 0) > 0;
    let gpuAvailable = false;
    if (wantsGpu) {
      gpuAvailable = (await deps.gpuSupport()).available;
    }
    await reap();
    sizes = poolSizes(wanted, gpuAvailable);
    refill();
  })().catch((err: unknown) => log(`the pool of pre-booted worker containers is off: ${errorMessage(err)}`));

  return {
    artifacts,
    names,
    started,
    /** A ready pool container of `kind`, out of the pool, or undefined. The caller refills (`refill()`) after its claim. */
    async take(kind: WorkerImageKind): Promise<PooledContainer | undefined> {
      while (ready[kind].length > 0) {
        const taken = ready[kind].shift()!;
        // The caller refills once its claim is done; one that failed to boot is replaced now.
        if (await taken.ready) {
          names.delete(taken.name);
          return taken;
        }
        refill();
      }
      return undefined;
    },
    refill,
    waiting(): PooledContainer[] {
      return [...ready.cpu, ...ready.gpu];
    },
    async close(): Promise<void> {
      await started;
      const all = [...ready.cpu.splice(0), ...ready.gpu.splice(0)];
      await Promise.all(
        all.map(async (entry) => {
          await entry.ready;
          await entry.container?.remove({ force: true }).catch((err: unknown) => {
            if (dockerStatus(err) !== 404) log(`could not remove pre-booted container ${entry.name}: ${dockerMessage(err)}`);
          });
        }),
      );
      if (!options.artifactCacheDir) await removeArtifactsDir(artifacts.dir);
    },
  };
}
