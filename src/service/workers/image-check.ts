// The check a prebuilt image (a load-balanced REST endpoint's) goes through before its endpoint gets traffic: one
// worker of it, started outside the pool on a free GPU of its own where there is one, asked for /ping (waiting
// while it starts), then stopped.

import type { WorkerHandle } from "../../drivers/types.js";
import type { EndpointRow } from "../store/types.js";
import { checkPingPath, type PingCheck } from "../lb/ping.js";
import { gpuRequestOf } from "../../gpus/allocate.js";
import { errorMessage } from "../../errors.js";
import type { ScalerDeps } from "./scaler-deps.js";
import { prebuiltImageOf } from "./worker-kinds.js";

/**
 * The check a prebuilt image goes through before its endpoint gets traffic: one worker of it, started outside
 * the pool, asked for /ping (waiting up to `waitMs` while it starts), then stopped. Never throws.
 */
export async function checkImage(
  deps: Pick<ScalerDeps, "driver" | "gpus" | "apiUrl" | "onLog">,
  endpoint: EndpointRow,
  waitMs: number,
  after: { stop(workerId: string, handle: WorkerHandle, context: string): Promise<void>; kick(): void },
): Promise<PingCheck> {
  const image = prebuiltImageOf(endpoint);
  const workerId = `wcheck${Math.random().toString(36).slice(2, 8)}${Date.now().toString(36)}`;
  let handle: WorkerHandle | undefined;
  // Its own GPU where one is free (held for the check); otherwise it runs without one rather than on a GPU
  // another worker holds.
  const request = deps.gpus?.assigning ? gpuRequestOf(endpoint.resource) : undefined;
  const allocation = request ? deps.gpus!.allocate(request) : undefined;
  if (allocation?.kind === "allocated") deps.gpus!.hold(workerId, endpoint.id, allocation.uuids, allocation.typeId);
  const gpus = !request ? undefined : allocation?.kind === "allocated" ? allocation.uuids : [];
  try {
    if (!image) throw new Error(`endpoint ${endpoint.name} runs no prebuilt image`);
    handle = await deps.driver.start({
      workerId,
      endpointId: endpoint.id,
      endpointName: endpoint.name,
      app: endpoint.app,
      env: endpoint.env,
      artifactPath: "",
      apiUrl: deps.apiUrl,
      workerToken: "",
      environment: { ...endpoint.resource.env },
      maxConcurrency: 1,
      computeType: gpus?.length === 0 ? "CPU" : endpoint.resource.computeType,
      gpuTypeIds: endpoint.resource.gpuTypeIds,
      gpus: endpoint.resource.computeType === "CPU" ? [] : gpus,
      loadBalanced: true,
      image,
      onLog: (line) => deps.onLog(endpoint.id, workerId, line),
    });
    if (!handle.address) throw new Error("the driver gave no address for the image's HTTP server");
    return await checkPingPath(handle.address, { waitMs });
  } catch (err) {
    return { ok: false, state: "unreachable", message: `could not start image "${image}" to check its /ping: ${errorMessage(err)}` };
  } finally {
    if (handle) await after.stop(workerId, handle, " (its image's /ping check)");
    if (deps.gpus?.release(workerId).length) after.kick();
  }
}
