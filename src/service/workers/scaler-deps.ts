// What the scaler is given: the engine, the driver, the service's address and the parts it asks (keys, secrets,
// models, GPUs, volumes, the load balancer), and the hooks it tells (logs, events, worker life, probes).

import type { WorkerTraceExport } from "../tracing/index.js";
import type { LogFields } from "../logging.js";
import type { ContainerAllowances, WorkerBucket, WorkerDriver, WorkerExit, WorkerLogLine } from "../../drivers/types.js";
import { type RegistryCredentials } from "../../drivers/registry-auth.js";
import type { JobEngine } from "../engine/index.js";
import type { EndpointRow } from "../store/types.js";
import { type HostGpus } from "../../gpus/host.js";
import { type CrashLoopPolicy, type DeathReason } from "./crash-loop.js";

export interface LaunchInfo {
  endpoint: EndpointRow;
  workerId: string;
  workerToken: string;
  apiKey: string;
}

export interface ScalerDeps {
  engine: JobEngine;
  driver: WorkerDriver;
  apiUrl: string;
  /** Mint the worker's token and a key for cross-endpoint calls (revoked when the worker ends). */
  /** What an endpoint's image is allowed beyond the sandbox's defaults (its /dev/shm size, its writable root). */
  containerAllowances?(endpoint: EndpointRow): ContainerAllowances;
  /** The registry credentials an endpoint's image is pulled with (its template's registry auth), opened. */
  registryAuth?(endpoint: EndpointRow): RegistryCredentials | undefined;
  /** The heartbeat period workers are told (a provider worker's ping period). */
  heartbeatMs?: number;
  /** Where svc's workers send their runtime's spans, when the service traces (tracing/index.ts). */
  traces?: WorkerTraceExport;
  /** `bucket`: an S3 key on the endpoint's network volume, when it has one (BUCKET_* in the worker). */
  mintWorkerKeys(endpoint: EndpointRow, workerId: string): Promise<{ workerToken: string; apiKey: string; bucket?: WorkerBucket }>;
  revokeWorkerKeys(workerId: string, endpointId: string): Promise<void>;
  endpoints(): Iterable<EndpointRow>;
  /** The secrets an endpoint's workers get, and a digest that changes with their values (which rolls them). */
  secrets?(endpoint: EndpointRow): { env: Record<string, string>; digest: string };
  volume?(endpoint: EndpointRow): { id: string; sizeGb: number; path: string } | undefined;
  /**
   * The host's model cache (models/cache.ts): an endpoint that names models gets workers once every one is in it
   * (fetched now if not, outside any worker's time); its workers get it read-only, and a model a worker uses
   * stays in it while the worker runs.
   */
  models?: {
    readonly root: string;
    ready(models: readonly string[]): boolean;
    ensure(model: string): Promise<void>;
    hold(workerId: string, models: readonly string[]): void;
    release(workerId: string): void;
    /** Why workers wait for these models (being fetched, or failed), in one line; undefined: they do not. */
    reason(models: readonly string[]): string | undefined;
    /** Whether any of these is being downloaded right now (not failed, not waiting to be tried again). */
    fetching(models: readonly string[]): boolean;
  };
  /** The hub and token a driver's nodes fetch models from (drivers with `nodeModelCache`). */
  modelHub?: { url: string; token?: string };
  /** The data center of the endpoint's network volume (its workers must run there). */
  dataCenterOf?(endpoint: EndpointRow): string | undefined;
  /** A path on this machine holding the artifact recorded as `path` (another replica may have received it). */
  localArtifact?(path: string): Promise<string>;
  onLog(endpointId: string, workerId: string, line: WorkerLogLine): void;
  /** An operator message, with the endpoint and worker it is about (logging.ts). */
  onEvent?(message: string, fields?: LogFields): void;
  /**
   * The GPUs of the host the driver's workers run on (process and Docker drivers): each GPU worker is given whole
   * GPUs no other worker holds, and waits while there are none. Absent (Swarm, Kubernetes: their schedulers
   * place GPUs), or a host without GPUs: GPU workers start unassigned.
   */
  gpus?: HostGpus;
  /** Whether a release's probe has proved its code starts (its endpoint counts ready in its release). */
  probeReady?(workerId: string): boolean;
  /** A release's probe worker ended (or could not be started) before it was promoted. */
  onProbeExit?(workerId: string, exit: WorkerExit | { error: string }): void;
  /** A worker failed to start: exited before it registered, or the driver could not start it. */
  onStartFailure?(endpointId: string, workerId: string, message: string): void;
  /**
   * A worker's life, for usage records: it runs (the driver started it, or it was adopted), with the host GPUs it
   * holds; it ended. A worker the driver never started has no life.
   */
  onWorkerLife?(
    event:
      | { type: "started"; workerId: string; endpointId: string; userId?: string; gpus: { typeId: string | null; count: number } }
      | { type: "stopped"; workerId: string },
  ): void;
  /** An endpoint's first job taken by a worker started for it from none: the cold start, in ms. */
  onColdStart?(endpointId: string, ms: number): void;
  /** A worker ended unasked (or could not be started), and why. */
  onWorkerDeath?(endpointId: string, reason: DeathReason): void;
  /** When an endpoint whose workers keep dying counts as crash-looping, and how its restarts back off. */
  crashLoop?: Partial<CrashLoopPolicy>;
  /**
   * Replicas on one database: a worker that registers here though this replica did not start it (another
   * replica did, and died or stepped down) is adopted, so workersMax holds across the cluster. It is stopped by
   * draining it through the protocol, and counted gone once it stays silent `silentMs`.
   */
  adoptRegistered?: { silentMs: number };
  /** Load-balanced endpoints scale on their proxy's requests (waiting ones and in-flight ones). */
  lb?: {
    load(endpointId: string): { queued: number; inProgress: number };
    busy(workerId: string): boolean;
    /** Workers of this endpoint may take traffic now (probes promoted): serve what waits. */
    wake?(endpointId: string): void;
  };
}
