// Stopping workers through their driver. A stop the driver fails is said, naming the worker and the driver's
// error, and counted per endpoint (/health): such a worker may still run.

import type { WorkerHandle } from "../../drivers/types.js";
import { errorMessage } from "../../errors.js";
import type { ScalerDeps } from "./scaler-deps.js";

export class DriverStops {
  /** Per endpoint: stops the driver failed, and the last error. */
  readonly failures = new Map<string, { count: number; lastError: string }>();

  constructor(private readonly deps: Pick<ScalerDeps, "driver" | "onEvent">) {}

  /**
   * Ask the driver to stop a worker. A driver that fails to (a container runtime that does not answer, a process
   * it cannot signal) leaves a worker that may still run and hold its GPU: said, with the worker and the error,
   * and counted per endpoint.
   */
  stop(workerId: string, endpointId: string, handle: WorkerHandle, graceMs: number, context = ""): Promise<void> {
    return handle.stop(graceMs).then(
      () => undefined,
      (err: unknown) => {
        const message = errorMessage(err) ?? String(err);
        const entry = this.failures.get(endpointId) ?? { count: 0, lastError: "" };
        entry.count++;
        entry.lastError = message;
        this.failures.set(endpointId, entry);
        this.deps.onEvent?.(`the ${this.deps.driver.name} driver failed to stop worker ${workerId} of endpoint ${endpointId}${context}: ${message}`, {
          endpoint: endpointId,
          worker: workerId,
        });
      },
    );
  }
}
