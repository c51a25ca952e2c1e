// The management API mounted into the service: routing of its families, rate limiting of every authenticated
// request, the OpenAPI document, and how endpoints find their network volume's directory.
//
//   {base_url}/v2/network-volumes[/{id}]          volumes            (management:read / management:write / admin)
//   {base_url}/v2/data-centers                     data centers       (any management read scope)
//   {rest_url}/v1/endpoints[/{id}]                 REST endpoints     (same)
//   {rest_url}/v1/templates[/{id}]                 templates          (same)
//   {rest_url}/v1/keys[/{id}]                      API keys           (admin)
//   {rest_url}/v1/me                               who the key is     (any user key)
//   GET /openapi.json                              OpenAPI 3.1        (no key needed)

import type { IncomingMessage, ServerResponse } from "node:http";
import type { ApiContext, RouteCall, RouteHandler } from "../api-context.js";
import type { RouteRow } from "../router.js";
import type { Principal } from "../auth.js";
import type { EngineEndpoint } from "../engine.js";
import { HttpProblem, sendJson, sendProblem } from "../http.js";
import { OPENAPI_PATH, openApiDocument } from "../openapi.js";
import { parseRateLimits, RateLimiter, type RateDecision, type RateLimiting, type RateWindow } from "../ratelimit.js";
import type { EndpointRow } from "../store/types.js";
import { requireAccess, resolveVolume, volumeDir, type ManagementContext } from "./context.js";
import { dataCenterConfig, LOCAL_DATA_CENTER, type DataCenter } from "./datacenters.js";
import { endpointRoute, RestEndpoints, templateRoute } from "./endpoints.js";
import { keyJson, keyRoute } from "./keys.js";
import { secretRoute } from "../secrets/routes.js";
import type { KeyRecord, ManagementStore } from "./store.js";
import { volumeRoute } from "./volumes.js";

export interface ManagementOptions {
  dataDir: string;
  /** Its records (storage.ts opens them beside the main store). */
  store: ManagementStore;
  dataCenters?: DataCenter[];
  hostDataCenter?: string;
  rateLimits?: RateWindow[];
  /** Counts requests against the rate limits (default: this process's own counts). */
  limiter?: RateLimiting;
  operatorUser: string;
  engineEndpoint(row: EndpointRow): EngineEndpoint;
  /** Why the service serves one user only, when it does (ManagementContext.singleUser). */
  singleUser?: string;
}

/**
 * Who a key acts as: its user, the key's record (a key given to the service at start has none: it is the
 * operator's bootstrap key), scopes and the user's rate-limit windows. Pure.
 */
export function whoami(p: Principal, record: KeyRecord | undefined, windows: readonly RateWindow[]) {
  return {
    userId: p.userId,
    keyId: p.keyId,
    key: record ? keyJson(record, p.keyId) : null,
    scopes: p.scopes,
    worker: p.worker ? { endpointId: p.worker.endpointId } : undefined,
    rateLimits: windows.map((w) => ({ name: w.name, quota: w.quota, seconds: w.seconds })),
  };
}

export class Management {
  readonly context: ManagementContext;
  private rest?: RestEndpoints;
  private openapi?: string;

  constructor(options: ManagementOptions) {
    this.context = {
      store: options.store,
      dataDir: options.dataDir,
      dataCenters: dataCenterConfig(options.dataCenters, options.hostDataCenter),
      limiter: options.limiter ?? new RateLimiter(options.rateLimits),
      operatorUser: options.operatorUser,
      engineEndpoint: options.engineEndpoint,
      ...(options.singleUser ? { singleUser: options.singleUser } : {}),
    };
  }

  /**
   * Bind to the API context (once it exists) and, when `refresh`, re-plan REST endpoints against the current
   * configuration (the replica serving jobs does; the others follow what it writes).
   */
  async attach(ctx: ApiContext, refresh = true): Promise<void> {
    this.rest = new RestEndpoints(() => ctx, this.context);
    if (refresh) await this.rest.refreshAll();
  }

  /** An app endpoint was (re)deployed: REST endpoints running its code follow it. */
  async appChanged(): Promise<void> {
    await this.rest?.refreshAll();
  }

  /** Unauthenticated routes. True when answered. */
  public(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): boolean {
    // Cheap first test: this runs before every request, the job API's hot path included.
    if (!req.url?.startsWith(OPENAPI_PATH) || req.url.split("?")[0] !== OPENAPI_PATH) return false;
    req.resume();
    if (req.method !== "GET") {
      sendProblem(res, 405, `${req.method} is not allowed here; use GET`, { headers: { allow: "GET" } });
      return true;
    }
    this.openapi ??= JSON.stringify(openApiDocument(ctx.url));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(this.openapi), "cache-control": "max-age=60" });
    res.end(this.openapi);
    return true;
  }

  /** Count one request of this principal (workers are not limited): the decision, or undefined for a worker. */
  rateDecision(p: Principal): RateDecision | undefined {
    return p.worker ? undefined : this.context.limiter.hit(p.userId);
  }

  /**
   * Count the request against its user's quotas and set the RateLimit headers on the answer (whatever it turns
   * out to be). Past a quota: 429 naming the window, with Retry-After. Worker tokens are not limited: they
   * carry the service's own protocol traffic.
   */
  limit(p: Principal, res: ServerResponse): void {
    const d = this.rateDecision(p);
    if (!d) return;
    res.setHeader("RateLimit", d.rateLimit);
    res.setHeader("RateLimit-Policy", d.policy);
    if (!d.allowed) {
      const w = d.exceeded!;
      throw new HttpProblem(429, `Rate limit exceeded: ${w.quota} requests per ${w.name} (${w.seconds} s window); retry in ${d.retryAfter} s`, {
        headers: { "retry-after": String(d.retryAfter) },
      });
    }
  }

  /** REST endpoints, once attached (they need the API context). */
  restEndpoints(): RestEndpoints {
    if (!this.rest) throw new HttpProblem(503, "The service is still starting; retry in a moment", { headers: { "retry-after": "1" } });
    return this.rest;
  }

  /** Why a REST endpoint gets no workers (its statusReason), for answers that must say so. */
  statusReason(endpointId: string): string | undefined {
    return this.rest?.statusReason(endpointId);
  }

  /** Host directory of an endpoint's network volume: one of its owner's volumes, by id or name. */
  volumePath(endpoint: EndpointRow): string | undefined {
    const ref = endpoint.resource.volume;
    if (!ref) return undefined;
    const volume = resolveVolume(this.context.store.allVolumes(), endpoint.userId, ref);
    return volume ? volumeDir(this.context.dataDir, volume.id) : undefined;
  }

  /**
   * The data center of an endpoint's network volume, where its workers must run; undefined with one data center
   * configured (every machine is in it, and nodes need no label).
   */
  volumeDataCenter(endpoint: EndpointRow): string | undefined {
    const ref = endpoint.resource.volume;
    if (!ref || this.context.dataCenters.dataCenters.length < 2) return undefined;
    return resolveVolume(this.context.store.allVolumes(), endpoint.userId, ref)?.dataCenter;
  }

  close(): void {
    this.context.store.close();
  }
}

function management(call: RouteCall): Management {
  if (!call.ctx.management) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return call.ctx.management;
}

const MANAGE = { auth: "user", body: "handler", rateLimited: true, purpose: "call the management API" } as const;

/** The management API's routes (api.ts mounts them first: their paths are never an endpoint's). */
export const MANAGEMENT_ROUTES: Array<RouteRow<RouteHandler>> = [
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v2/network-volumes", handler: (c) => volumeRoute(c.ctx, management(c).context, c.principal, c.req, c.res, undefined) },
  { ...MANAGE, methods: ["GET", "PATCH", "DELETE"], pattern: "/v2/network-volumes/:id", handler: (c) => volumeRoute(c.ctx, management(c).context, c.principal, c.req, c.res, c.params.id) },
  {
    ...MANAGE,
    body: "none",
    methods: ["GET"],
    pattern: "/v2/data-centers",
    handler: (c) => {
      requireAccess(c.principal, "volumes", false);
      sendJson(c.res, management(c).context.dataCenters.dataCenters);
    },
  },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/endpoints", handler: (c) => endpointRoute(c.ctx, management(c).context, management(c).restEndpoints(), c.principal, c.req, c.res, undefined) },
  { ...MANAGE, methods: ["GET", "PATCH", "DELETE"], pattern: "/v1/endpoints/:id", handler: (c) => endpointRoute(c.ctx, management(c).context, management(c).restEndpoints(), c.principal, c.req, c.res, c.params.id) },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/templates", handler: (c) => templateRoute(management(c).context, c.principal, c.req, c.res, undefined) },
  { ...MANAGE, methods: ["GET", "DELETE"], pattern: "/v1/templates/:id", handler: (c) => templateRoute(management(c).context, c.principal, c.req, c.res, c.params.id) },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/keys", handler: (c) => keyRoute(c.ctx, management(c).context, c.principal, c.req, c.res, undefined) },
  { ...MANAGE, methods: ["GET", "DELETE"], pattern: "/v1/keys/:id", handler: (c) => keyRoute(c.ctx, management(c).context, c.principal, c.req, c.res, c.params.id) },
  { ...MANAGE, methods: ["GET"], pattern: "/v1/secrets", handler: (c) => secretRoute(secretsOf(c), c.ctx.endpoints.values(), c.principal, c.req, c.res, undefined) },
  { ...MANAGE, methods: ["PUT", "DELETE"], pattern: "/v1/secrets/:name", handler: (c) => secretRoute(secretsOf(c), c.ctx.endpoints.values(), c.principal, c.req, c.res, c.params.name) },
  {
    // Who the key is: worker tokens may ask too (they learn their endpoint).
    auth: "any",
    body: "none",
    rateLimited: true,
    methods: ["GET"],
    pattern: "/v1/me",
    handler: async (c) => {
      const m = management(c).context;
      sendJson(c.res, whoami(c.principal, await m.store.key(c.principal.keyId), m.limiter.windows));
    },
  },
];

function secretsOf(call: RouteCall) {
  if (!call.ctx.secrets) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return call.ctx.secrets;
}
