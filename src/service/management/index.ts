// The management API mounted into the service: routing of its families, rate limiting of every authenticated
// request, the OpenAPI document, and how endpoints find their network volume's directory.
//
//   {base_url}/v2/network-volumes[/{id}]          volumes            (management:read / management:write / admin)
//   {base_url}/v2/data-centers                     data centers       (any management read scope)
//   {rest_url}/v1/endpoints[/{id}]                 REST endpoints     (same)
//   {rest_url}/v1/templates[/{id}]                 templates          (same)
//   {rest_url}/v1/keys[/{id}]                      API keys           (admin)
//   {rest_url}/v1/volume-keys[/{id}]               S3 access keys     (management:read / management:write)
//   {rest_url}/v1/me                               who the key is     (any user key)
//   GET /openapi.json                              OpenAPI 3.1        (no key needed)

import { existsSync } from "node:fs";
import { lstat, rename } from "node:fs/promises";
import { plainVolumeStorage, type VolumeStorage } from "../volumes/storage.js";
import type { ContainerAllowances } from "../../drivers/types.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import type { Route, RouteCall } from "../http/router.js";
import type { Secrets } from "../secrets/index.js";
import { newId, type Principal } from "../keys/auth.js";
import type { EngineEndpoint } from "../engine/index.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem, sendProblem } from "../http/problems.js";
import { OPENAPI_PATH, openApiDocument } from "../http/openapi.js";
import { RateLimiter, type RateDecision, type RateLimiting, type RateWindow } from "../keys/ratelimit.js";
import type { EndpointRow } from "../store/types.js";
import { MIN_VOLUME_GB } from "../http/schema.js";
import { requireAccess, resolveVolume, volumeDir, type ManagementContext, type ManagementDeps } from "./context.js";
import { dataCenterConfig, type DataCenter } from "./datacenters.js";
import { endpointRoute } from "./endpoints.js";
import { RestEndpoints } from "./rest-endpoints.js";
import { templateRoute } from "./templates.js";
import { keyJson, keyRoute } from "./keys.js";
import { openRegistryAuth, registryAuthRoute } from "./registry-auths.js";
import type { RegistryCredentials } from "../../drivers/registry-auth.js";
import type { SecretBox } from "../secrets/box.js";
import { secretRoute } from "../secrets/routes.js";
import { volumeKeyRoute, type VolumeKeysDeps } from "../volumes/keys.js";
import type { KeyRecord, ManagementStore, VolumeRecord } from "./store.js";
import { planDeployVolumes, volumeRoute, type DeployVolumes } from "./volumes.js";

export type { ManagementDeps } from "./context.js";

/** What the management rows need: the management API itself and users' secrets, when the service has them. */
export interface ManagementApiDeps extends ManagementDeps {
  management?: Management;
  secrets?: Secrets;
}

type ManagementCall = RouteCall<ManagementApiDeps>;

export interface ManagementOptions {
  dataDir: string;
  /** Its records (stores.ts opens them beside the main store). */
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
  /** What seals users' registry credentials (the secrets key). */
  box?: SecretBox;
  /** Where volumes' files live (default: plain directories, their size binding S3 writes only). */
  volumeStorage?: VolumeStorage;
}

/**
 * Who a key acts as: its user, the key's record (a key given to the service at start has none: it is the
 * operator's bootstrap key), scopes and the user's rate-limit windows. Pure.
 */
export function whoami(p: Principal, record: KeyRecord | undefined, windows: readonly RateWindow[], volumeQuotas: boolean) {
  return {
    userId: p.userId,
    keyId: p.keyId,
    key: record ? keyJson(record, p.keyId) : null,
    scopes: p.scopes,
    worker: p.worker ? { endpointId: p.worker.endpointId } : undefined,
    rateLimits: windows.map((w) => ({ name: w.name, quota: w.quota, seconds: w.seconds })),
    // Whether a network volume's size binds what workers write to it (else S3 writes only): `svc doctor` says.
    volumeQuotas: volumeQuotas ? "filesystem" : "s3-only",
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
      ...(options.box ? { box: options.box } : {}),
      volumeStorage: options.volumeStorage ?? plainVolumeStorage(options.dataDir),
    };
  }

  /**
   * Bind to the API context (once it exists) and, when `refresh`, re-plan REST endpoints against the current
   * configuration (the replica serving jobs does; the others follow what it writes).
   */
  async attach(ctx: ManagementDeps, refresh = true): Promise<void> {
    this.rest = new RestEndpoints(() => ctx, this.context);
    if (refresh) await this.rest.refreshAll();
  }

  /** An app endpoint was (re)deployed: REST endpoints running its code follow it. */
  async appChanged(): Promise<void> {
    await this.rest?.refreshAll();
  }

  /** Unauthenticated routes. True when answered. */
  public(ctx: { url: string }, req: IncomingMessage, res: ServerResponse): boolean {
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

  /**
   * What a REST endpoint's image is allowed beyond the sandbox's defaults (its template's /dev/shm size and
   * writable root); undefined for an endpoint that is not a REST endpoint of an image.
   */
  containerAllowances(endpointId: string): ContainerAllowances | undefined {
    return this.rest?.containerAllowances(endpointId);
  }

  /**
   * The registry credentials a REST endpoint's image is pulled with (its template's registry auth), opened for a
   * worker's start; undefined when its template names none. Throws when they cannot be opened (the start fails
   * saying so).
   */
  registryCredentials(endpointId: string): RegistryCredentials | undefined {
    const record = this.rest?.registryAuthOf(endpointId);
    if (!record) return undefined;
    if (!this.context.box) throw new Error(`registry auth "${record.name}" cannot be opened: this service has no secrets key`);
    return openRegistryAuth(this.context.box, record);
  }

  /** Why a REST endpoint gets no workers (its statusReason), for answers that must say so. */
  statusReason(endpointId: string): string | undefined {
    return this.rest?.statusReason(endpointId);
  }

  /**
   * An endpoint's network volume (its id, size and host directory): one of its owner's volumes, by id or name. A setting naming
   * none of them fails the worker's start (deploys create or refuse such names first, so only an endpoint kept
   * from before that rule gets here): running it without its volume, or on a folder others can name, is worse.
   */
  volumeOf(endpoint: EndpointRow): { id: string; sizeGb: number; path: string } | undefined {
    const ref = endpoint.resource.volume;
    if (!ref) return undefined;
    const volume = resolveVolume(this.context.store.allVolumes(), endpoint.userId, ref);
    if (!volume) throw new Error(`its network volume "${ref}" is not one of its owner's volumes: redeploy it to create one of that name`);
    return { id: volume.id, sizeGb: volume.size, path: volumeDir(this.context.dataDir, volume.id) };
  }

  /** What a deploy by `userId` of these endpoints does to the user's volumes (planDeployVolumes). */
  deployVolumes(userId: string, resources: Record<string, { volume?: string | null }>, now = Date.now()): DeployVolumes {
    const dc = this.context.dataCenters.dataCenters.find((d) => d.id === this.context.dataCenters.host)!;
    return planDeployVolumes(this.context.store.volumes(userId), userId, resources, (name) => ({
      id: `vol${newId(6)}`,
      userId,
      name,
      size: MIN_VOLUME_GB,
      dataCenter: dc.id,
      type: dc.primaryVolumeType,
      createdAt: now,
    }));
  }

  /** Create the volumes a deploy planned: their directories, then their records. */
  async createVolumes(volumes: VolumeRecord[], adopt?: Map<string, string>): Promise<void> {
    for (const v of volumes) {
      const legacy = adopt?.get(v.id);
      if (legacy) {
        // An older folder becomes the volume (its files moved into a filesystem of their own where quotas are on).
        await rename(legacy, volumeDir(this.context.dataDir, v.id));
        await this.context.volumeStorage.attachAll([v]);
      } else await this.context.volumeStorage.create(v.id, v.size);
      await this.context.store.putVolume(v);
    }
  }

  /**
   * Endpoints deployed before `volume` settings were resolved per user name a plain folder `<dataDir>/volumes/<name>`
   * that every user could name. At start each such setting becomes a volume of the endpoint's owner; the old folder
   * becomes that volume when one user alone names it (otherwise it is left where it is, and said).
   */
  async adoptLegacyVolumes(rows: Iterable<EndpointRow>, log: (message: string) => void): Promise<void> {
    const byUser = new Map<string, Record<string, { volume: string }>>();
    const usersOfName = new Map<string, Set<string>>();
    for (const row of rows) {
      const ref = row.resource.volume;
      if (!ref || row.app === "" || resolveVolume(this.context.store.allVolumes(), row.userId, ref)) continue;
      byUser.set(row.userId, { ...byUser.get(row.userId), [`${row.app}/${row.env}/${row.name}`]: { volume: ref } });
      usersOfName.set(ref, (usersOfName.get(ref) ?? new Set()).add(row.userId));
    }
    for (const [userId, resources] of byUser) {
      const plan = this.deployVolumes(userId, resources);
      for (const e of plan.errors) log(`${e}: its workers will not start until it is redeployed`);
      const adopt = new Map<string, string>();
      for (const v of plan.create) {
        const legacy = join(this.context.dataDir, "volumes", v.name);
        const sharedBy = usersOfName.get(v.name)!;
        // No such folder (the usual case) means nothing to adopt: the new volume starts empty.
        if (sharedBy.size === 1 && (await lstat(legacy).catch(() => undefined))?.isDirectory()) adopt.set(v.id, legacy);
        else if (sharedBy.size > 1 && existsSync(legacy))
          log(
            `the folder ${legacy} was named by several users' endpoints; each now has its own empty volume "${v.name}" and the folder is left for the operator`,
          );
      }
      await this.createVolumes(plan.create, adopt);
      for (const v of plan.create)
        log(`endpoint volume "${v.name}" of user ${userId} is now network volume ${v.id}${adopt.has(v.id) ? " (its files kept)" : ""}`);
    }
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

function management(call: ManagementCall): Management {
  if (!call.ctx.management) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return call.ctx.management;
}

const MANAGE = { auth: "user", body: "handler", rateLimited: true, purpose: "call the management API" } as const;

/** The management API's routes (api.ts mounts them first: their paths are never an endpoint's). */
export const MANAGEMENT_ROUTES: ReadonlyArray<Route<ManagementApiDeps>> = [
  {
    ...MANAGE,
    methods: ["GET", "POST"],
    pattern: "/v2/network-volumes",
    handler: (c) => volumeRoute(c.ctx, management(c).context, c.principal, c.req, c.res, undefined),
  },
  {
    ...MANAGE,
    methods: ["GET", "PATCH", "DELETE"],
    pattern: "/v2/network-volumes/:id",
    handler: (c) => volumeRoute(c.ctx, management(c).context, c.principal, c.req, c.res, c.params.id),
  },
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
  {
    ...MANAGE,
    methods: ["GET", "POST"],
    pattern: "/v1/endpoints",
    handler: (c) => endpointRoute(c.ctx, management(c).context, management(c).restEndpoints(), c.principal, c.req, c.res, undefined),
  },
  {
    ...MANAGE,
    methods: ["GET", "PATCH", "DELETE"],
    pattern: "/v1/endpoints/:id",
    handler: (c) => endpointRoute(c.ctx, management(c).context, management(c).restEndpoints(), c.principal, c.req, c.res, c.params.id),
  },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/templates", handler: (c) => templateRoute(management(c).context, c.principal, c.req, c.res, undefined) },
  {
    ...MANAGE,
    methods: ["GET", "PATCH", "DELETE"],
    pattern: "/v1/templates/:id",
    handler: (c) => templateRoute(management(c).context, c.principal, c.req, c.res, c.params.id, () => management(c).restEndpoints().refreshAll()),
  },
  {
    ...MANAGE,
    methods: ["GET", "POST"],
    pattern: "/v1/containerregistryauth",
    handler: (c) => registryAuthRoute(management(c).context, c.principal, c.req, c.res, undefined),
  },
  {
    ...MANAGE,
    methods: ["GET", "DELETE"],
    pattern: "/v1/containerregistryauth/:id",
    handler: (c) => registryAuthRoute(management(c).context, c.principal, c.req, c.res, c.params.id),
  },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/volume-keys", handler: (c) => volumeKeyRoute(volumeKeysOf(c), c.principal, c.req, c.res, undefined) },
  {
    ...MANAGE,
    methods: ["GET", "DELETE"],
    pattern: "/v1/volume-keys/:id",
    handler: (c) => volumeKeyRoute(volumeKeysOf(c), c.principal, c.req, c.res, c.params.id),
  },
  { ...MANAGE, methods: ["GET", "POST"], pattern: "/v1/keys", handler: (c) => keyRoute(c.ctx, management(c).context, c.principal, c.req, c.res, undefined) },
  {
    ...MANAGE,
    methods: ["GET", "DELETE"],
    pattern: "/v1/keys/:id",
    handler: (c) => keyRoute(c.ctx, management(c).context, c.principal, c.req, c.res, c.params.id),
  },
  {
    ...MANAGE,
    methods: ["GET"],
    pattern: "/v1/secrets",
    handler: (c) => secretRoute(secretsOf(c), c.ctx.endpoints.values(), c.principal, c.req, c.res, undefined),
  },
  {
    ...MANAGE,
    methods: ["PUT", "DELETE"],
    pattern: "/v1/secrets/:name",
    handler: (c) => secretRoute(secretsOf(c), c.ctx.endpoints.values(), c.principal, c.req, c.res, c.params.name),
  },
  {
    // Who the key is: worker tokens may ask too (they learn their endpoint).
    auth: "any",
    body: "none",
    rateLimited: true,
    methods: ["GET"],
    pattern: "/v1/me",
    handler: async (c) => {
      const m = management(c).context;
      sendJson(c.res, whoami(c.principal, await m.store.key(c.principal.keyId), m.limiter.windows, m.volumeStorage.enforced));
    },
  },
];

/** What the volume access keys' routes need: the keys, the box sealing them, the user's volumes, the S3 address. */
function volumeKeysOf(call: ManagementCall): VolumeKeysDeps {
  const volumes = call.ctx.volumes;
  if (!volumes) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return { keys: volumes.keys, box: volumes.box, volumes: management(call).context.store, endpoint: volumes.endpoint, region: volumes.region };
}

function secretsOf(call: ManagementCall) {
  if (!call.ctx.secrets) throw new HttpProblem(404, `No route ${call.url.pathname}`);
  return call.ctx.secrets;
}
