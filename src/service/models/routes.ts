// GET /v1/models: the host's model cache (docs/models.md): the hub it fetches from, its size and limit, and each
// model in it or being fetched (its commit and bytes, how far a fetch is, why one failed, how many workers use
// it). Any management read key: model names are public on the hub, and the cache is the host's, not a user's.

import type { Route, RouteCall } from "../http/router.js";
import { sendJson } from "../http/wire.js";
import { requireAccess } from "../http/management-request.js";
import type { ModelCacheAnswer } from "../http/answers.js";
import type { ModelCache } from "./cache.js";

export interface ModelsDeps {
  /** The host's model cache; undefined where the service starts no workers. */
  models?(): ModelCache | undefined;
}

export type { ModelCacheAnswer };

export async function modelList(call: RouteCall<ModelsDeps>): Promise<void> {
  requireAccess(call.principal, "endpoints", false);
  const cache = call.ctx.models?.();
  const answer: ModelCacheAnswer = cache
    ? { hub: cache.hubUrl, root: cache.root, usedBytes: cache.usedBytes, limitBytes: cache.limitBytes ?? null, models: cache.list() }
    : { hub: null, root: null, usedBytes: 0, limitBytes: null, models: [] };
  sendJson(call.res, answer);
}

export const MODEL_ROUTES: ReadonlyArray<Route<ModelsDeps>> = [
  { auth: "user", rateLimited: true, body: "none", methods: ["GET"], pattern: "/v1/models", purpose: "read the host's model cache", handler: modelList },
];
