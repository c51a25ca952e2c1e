// A worker the scaler runs through its driver: what it holds for it (the handle, the waits before its start).

import type { WorkerExit, WorkerHandle } from "../../drivers/types.js";
import type { EndpointRow } from "../store/types.js";

/**
 * What the scaler holds for a worker it runs through its driver: the driver's handle and what the start waits for.
 * The worker's own state (revision, registered, ready, draining, addresses) is the engine's worker registry's.
 */
export interface ManagedWorker {
  id: string;
  endpointId: string;
  handle?: WorkerHandle;
  stopping: boolean;
  /**
   * A release's probe: it runs the new revision and takes no job until the release switches; the scaling plan
   * neither counts nor drains it.
   */
  probe: boolean;
  /** Started by an earlier run of the service (found by the driver after a restart), or by another replica. */
  adopted?: boolean;
  /** When the driver started it (or it was adopted); unset while it starts. */
  startedAt?: number;
  /** Started by another replica: no driver handle; ended by this when it falls silent. */
  remoteGone?: (exit: WorkerExit) => void;
  /**
   * A release's probe waiting for a GPU (not started yet): for the GPUs of a worker of its endpoint drained for it
   * (`victimId`: the release replaces in place), or for any that frees.
   */
  awaitingGpu?: { endpoint: EndpointRow; since: number; victimId?: string };
  /** The models it waits for in the host's cache before it starts (fetched now); unset once they are there. */
  awaitingModels?: readonly string[];
  /** When its driver start began, after its waits (for GPUs, models): a release times its start from here. */
  launchedAt?: number;
  /** A probe that proved its code starts, stopped to give its GPU to another probe of a release. */
  handingOver?: boolean;
}

export function newWorkerId(): string {
  return `w${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
}

/** A draining worker that still runs this long after it holds no job is stopped by the driver. */
export const DRAIN_GRACE_MS = 5_000;
