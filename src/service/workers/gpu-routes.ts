// GET /v1/gpus: the GPUs of the service's host (where its process or Docker workers run), their type ids, use as
// last sampled, and the worker holding each. Any management read key; a GPU held by another user's worker shows
// as held, without whose. docs/gpus.md.

import type { Route, RouteCall } from "../http/router.js";
import type { EndpointRow } from "../store/types.js";
import { DEFAULT_USER, isAdmin, type Principal } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { requireAccess } from "../http/management-request.js";
import type { GpuView, HostGpus } from "../../gpus/host.js";
import type { GpuListAnswer } from "../http/answers.js";

/** What the GPU list needs: this host's GPUs, and whose endpoint a holding worker serves. */
export interface GpuDeps {
  gpus?(): HostGpus | undefined;
  endpoints: ReadonlyMap<string, EndpointRow>;
}

/** The holder as this caller may see it: its own workers' and, for the operator, every one. Pure. */
export function visibleHolder(view: GpuView, principal: Principal, ownerOf: (endpointId: string) => string | undefined): GpuView["holder"] | { held: true } {
  if (!view.holder) return null;
  const operator = isAdmin(principal) && principal.userId === DEFAULT_USER;
  return operator || ownerOf(view.holder.endpointId) === principal.userId ? view.holder : { held: true };
}

export async function gpuList(call: RouteCall<GpuDeps>): Promise<void> {
  requireAccess(call.principal, "gpus", false);
  const gpus = call.ctx.gpus?.();
  if (!gpus) return sendJson(call.res, { gpus: [], driverVersion: null, cudaVersion: null, assigning: false, workersOnHost: false } satisfies GpuListAnswer);
  if (["1", "true"].includes(call.url.searchParams.get("refresh") ?? "")) await gpus.refresh();
  const owner = (endpointId: string) => call.ctx.endpoints.get(endpointId)?.userId;
  const inventory = gpus.inventory;
  const answer: GpuListAnswer = {
    gpus: gpus.view().map((g) => ({ ...g, holder: visibleHolder(g, call.principal, owner) })),
    driverVersion: inventory.driverVersion,
    cudaVersion: inventory.cudaVersion,
    assigning: gpus.assigning,
    workersOnHost: true,
    ...(gpus.readError ? { error: gpus.readError } : {}),
  };
  sendJson(call.res, answer);
}

export const GPU_ROUTES: ReadonlyArray<Route<GpuDeps>> = [
  { auth: "user", rateLimited: true, body: "none", methods: ["GET"], pattern: "/v1/gpus", purpose: "read the host's GPUs", handler: gpuList },
];
