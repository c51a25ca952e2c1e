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
import type { ApiContext } from "../api.js";
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
    };
  }

  /** Bind to the API context (once it exists) and re-plan REST endpoints against the current configuration. */
  async attach(ctx: ApiContext): Promise<void> {
    this.rest = new RestEndpoints(() => ctx, this.context);
    await this.rest.refreshAll();
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

  /** Management routes. True when the path is one of them (answered or thrown as a problem). */
  async route(ctx: ApiContext, p: Principal, req: IncomingMessage, res: ServerResponse, seg: string[]): Promise<boolean> {
    const m = this.context;
    if (seg[0] === "v2" && seg[1] === "network-volumes" && seg.length <= 3) {
      await volumeRoute(ctx, m, p, req, res, seg[2]);
      return true;
    }
    if (seg[0] === "v2" && seg[1] === "data-centers" && seg.length === 2) {
      req.resume();
      if (req.method !== "GET") throw new HttpProblem(405, `${req.method} is not allowed here; use GET`, { headers: { allow: "GET" } });
      requireAccess(p, "volumes", false);
      sendJson(res, m.dataCenters.dataCenters);
      return true;
    }
    if (seg[0] !== "v1" || seg.length > 3) return false;
    if (seg[1] === "endpoints" && this.rest) {
      await endpointRoute(ctx, m, this.rest, p, req, res, seg[2]);
      return true;
    }
    if (seg[1] === "templates") {
      await templateRoute(m, p, req, res, seg[2]);
      return true;
    }
    if (seg[1] === "keys") {
      await keyRoute(ctx, m, p, req, res, seg[2]);
      return true;
    }
    if (seg[1] === "secrets" && ctx.secrets) {
      await secretRoute(ctx.secrets, ctx.endpoints.values(), p, req, res, seg[2]);
      return true;
    }
    if (seg[1] === "me" && seg.length === 2) {
      req.resume();
      if (req.method !== "GET") throw new HttpProblem(405, `${req.method} is not allowed here; use GET`, { headers: { allow: "GET" } });
      sendJson(res, whoami(p, await m.store.key(p.keyId), m.limiter.windows));
      return true;
    }
    return false;
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

  close(): void {
    this.context.store.close();
  }
}
