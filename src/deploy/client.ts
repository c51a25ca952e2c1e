// The client side of the service's /v1/apps routes: apps, environments, build upload (streamed, with
// progress and retries), plans, activation, undeploy and configuration updates.

import { createReadStream } from "node:fs";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { ApiError, UnreachableError, UserError } from "../errors.js";
import {
  chooseTarget,
  envSetting,
  findDevSession,
  type Manifest,
  parseServiceJson,
  problemOf,
  readDotEnv,
  readJson,
  storedProfiles,
  type TargetChoice,
} from "svc/internal";
import { namedProfile } from "../profiles.js";

export interface ServiceAddress {
  url: string;
  apiKey: string;
  /** Where the address came from (svc/internal's target.ts): SVC_API_URL, a profile, a `svc dev` session, or the local default. */
  source?: TargetChoice["source"];
  profile?: string;
}

/**
 * The service a deploy (or an app, environment or release command) goes to, by the rule every command follows
 * (svc/internal's target.ts), with SVC_API_URL / SVC_API_KEY also read from the project's `.env`. `env` is the
 * environment the command names: a deploy to any environment but the dev session's never lands in the session.
 */
export function serviceAddress(projectDir?: string, env?: string): ServiceAddress {
  const fromProject = projectDir ? readDotEnv(projectDir) : {};
  const setting = (name: string) => envSetting(name) ?? (fromProject[name] || undefined);
  const session = findDevSession(projectDir ?? process.cwd());
  const choice = chooseTarget({ apiUrl: setting("SVC_API_URL"), apiKey: setting("SVC_API_KEY"), ...storedProfiles(namedProfile()), session, env });
  if (choice.apiKey)
    return { url: choice.url, apiKey: choice.apiKey, source: choice.source, ...(choice.profile !== undefined ? { profile: choice.profile } : {}) };
  if (choice.passedOverSession) {
    throw new UserError(
      `No service to use for environment "${env}": none is configured, and the running svc dev session only takes --env ${choice.passedOverSession.env}`,
      {
        hint: `Run \`svc login --url <service URL>\` (or set SVC_API_URL and SVC_API_KEY) to use a service, or pass --env ${choice.passedOverSession.env} to use the dev session at ${choice.passedOverSession.url}.`,
      },
    );
  }
  throw new UserError("No API key: SVC_API_KEY is not set", {
    hint: "Run `svc login --url <service URL>`, or set SVC_API_KEY in the environment or in a .env file (`svc server` prints where its admin key is).",
  });
}

export interface EndpointInfo {
  name: string;
  id: string;
  url: string;
  type: "queue" | "lb";
  routes: string[];
  workersMin?: number;
  workersMax?: number;
  gpuTypeIds?: string[];
  idleTimeout?: number;
  unhealthyWorkers?: number;
  lastStartError?: { message: string; at: number } | null;
}

export interface EnvironmentInfo {
  app: string;
  env: string;
  createdAt: number;
  activatedAt: number | null;
  build: string | null;
  fingerprint: string | null;
  endpoints: EndpointInfo[];
  /** Recent releases, newest first (absent from a service older than releases). */
  releases?: ReleaseInfo[];
}

/** One activation of a build and its outcome (the service's release record). */
export interface ReleaseInfo {
  id: string;
  app: string;
  env: string;
  buildId: string;
  previousBuildId: string | null;
  kind: "deploy" | "rollback";
  /** `replaced`: it went live, and a newer release of the environment has since (one is live at a time). */
  state: "starting" | "live" | "failed" | "superseded" | "replaced";
  startedAt: number;
  finishedAt: number | null;
  endpoints: Array<{
    name: string;
    id: string;
    action: "create" | "update";
    state: "starting" | "ready" | "failed";
    attempts: number;
    failures: number;
    error: string | null;
    /** Why its new worker has not started yet: "waiting for a GPU (HOPPER_141: 2 of 2 in use)". */
    waiting?: string;
  }>;
  error: { endpoint: string; message: string } | null;
}

export interface PlannedEndpoint extends EndpointInfo {
  action: "create" | "update" | "unchanged";
}

export interface PlanInfo {
  applied: boolean;
  /** What the service says of this deploy on its host (GPU endpoints that run on its CPU); absent from older services. */
  warnings?: string[];
  endpoints: PlannedEndpoint[];
  remove: Array<{ name: string; id: string }>;
}

export interface RemovedEndpoint {
  name: string;
  id: string;
  env: string;
}

export interface BuildInfo {
  id: string;
  app: string;
  size: number;
  fingerprint: string;
  createdAt: number;
}

export interface ConfigChange {
  name: string;
  id: string;
  changed: string[];
  restart: boolean;
}

const seg = encodeURIComponent;

export class DeployClient {
  constructor(readonly address: ServiceAddress) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.address.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.address.apiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new UnreachableError(this.address.url, err);
    }
    return readJson<T>(response);
  }

  /** null when the service has no such app. */
  async environments(app: string): Promise<EnvironmentInfo[] | null> {
    try {
      return (await this.request<{ environments: EnvironmentInfo[] }>("GET", `/v1/apps/${seg(app)}/environments`)).environments;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  apps() {
    return this.request<{ apps: Array<{ name: string; createdAt: number; environments: string[] }> }>("GET", "/v1/apps");
  }
  app(app: string) {
    return this.request<{ name: string; createdAt: number; environments: EnvironmentInfo[] }>("GET", `/v1/apps/${seg(app)}`);
  }
  deleteApp(app: string) {
    return this.request<{ deleted: string; environments: string[]; removed: RemovedEndpoint[] }>("DELETE", `/v1/apps/${seg(app)}`);
  }
  environment(app: string, env: string) {
    return this.request<EnvironmentInfo>("GET", `/v1/apps/${seg(app)}/environments/${seg(env)}`);
  }
  ensureEnvironment(app: string, env: string) {
    return this.request<EnvironmentInfo & { created: boolean }>("PUT", `/v1/apps/${seg(app)}/environments/${seg(env)}`);
  }
  deleteEnvironment(app: string, env: string) {
    return this.request<{ deleted: string; app: string; removed: RemovedEndpoint[] }>("DELETE", `/v1/apps/${seg(app)}/environments/${seg(env)}`);
  }
  async hasBuild(app: string, sha256: string): Promise<boolean> {
    try {
      await this.request<BuildInfo>("GET", `/v1/apps/${seg(app)}/builds/${sha256}`);
      return true;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return false;
      throw err;
    }
  }
  /** `manifest` lets the service plan a build it does not have yet (dry runs upload nothing). */
  plan(app: string, env: string, build: string, manifest?: Manifest) {
    return this.request<PlanInfo>("POST", `/v1/apps/${seg(app)}/environments/${seg(env)}/plan`, { build, manifest });
  }
  /**
   * Begin a release of `build` (wait: false): the answer comes once it began; `release` (absent from a service
   * older than releases) says whether it is live already or still starting its new workers.
   */
  activate(app: string, env: string, build: string, confirmRemove: string[], options: { rollback?: boolean } = {}) {
    return this.request<PlanInfo & { build: string; fingerprint: string; release?: ReleaseInfo }>(
      "POST",
      `/v1/apps/${seg(app)}/environments/${seg(env)}/activate`,
      {
        build,
        confirmRemove,
        wait: false,
        ...(options.rollback ? { rollback: true } : {}),
      },
    );
  }
  /** The environment's recent releases, newest first. */
  async releases(app: string, env: string): Promise<ReleaseInfo[]> {
    return (await this.request<{ releases: ReleaseInfo[] }>("GET", `/v1/apps/${seg(app)}/environments/${seg(env)}/releases`)).releases;
  }
  undeploy(app: string, env: string, what: { all: true } | { endpoints: string[] }) {
    return this.request<{ app: string; env: string; removed: RemovedEndpoint[] }>("POST", `/v1/apps/${seg(app)}/environments/${seg(env)}/undeploy`, what);
  }
  config(app: string, env: string, resources: Manifest["resources"], dryRun: boolean) {
    return this.request<{ app: string; env: string; dryRun: boolean; changes: ConfigChange[] }>(
      "POST",
      `/v1/apps/${seg(app)}/environments/${seg(env)}/config`,
      { resources, dryRun },
    );
  }

  /**
   * Stream the artifact to the service. Network failures and 5xx answers are retried (the service keeps
   * nothing from an incomplete upload); 4xx answers (too large, bad checksum or format) are not.
   */
  async upload(
    app: string,
    file: { path: string; size: number; sha256: string },
    options: { onProgress?: (sent: number, total: number) => void; attempts?: number; retryDelayMs?: number } = {},
  ): Promise<BuildInfo> {
    const attempts = options.attempts ?? 4;
    let lastError: unknown;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        return await this.uploadOnce(app, file, options.onProgress);
      } catch (err) {
        const retryable = err instanceof UnreachableError || (err instanceof ApiError && err.status >= 500);
        if (!retryable || attempt === attempts) throw err;
        lastError = err;
        await new Promise((r) => setTimeout(r, (options.retryDelayMs ?? 500) * 2 ** (attempt - 1)));
      }
    }
    throw lastError;
  }

  private uploadOnce(
    app: string,
    file: { path: string; size: number; sha256: string },
    onProgress?: (sent: number, total: number) => void,
  ): Promise<BuildInfo> {
    const target = new URL(`${this.address.url}/v1/apps/${seg(app)}/builds`);
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise<BuildInfo>((resolve, reject) => {
      const req = send(target, {
        method: "POST",
        headers: {
          authorization: `Bearer ${this.address.apiKey}`,
          "content-type": "application/gzip",
          "content-length": file.size,
          "x-svc-sha256": file.sha256,
        },
      });
      let answered = false;
      req.on("response", (res: IncomingMessage) => {
        answered = true;
        const parts: Buffer[] = [];
        res.on("data", (d: Buffer) => parts.push(d));
        res.on("error", (err) => reject(new UnreachableError(this.address.url, err)));
        res.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8");
          const status = res.statusCode ?? 0;
          let body: unknown;
          try {
            body = parseServiceJson(text, { url: target.href, status, contentType: res.headers["content-type"] ?? null });
          } catch (err) {
            return reject(err);
          }
          if (status >= 200 && status < 300) return resolve(body as BuildInfo);
          reject(new ApiError(problemOf(body, { status, statusText: res.statusMessage, text })));
        });
      });
      req.on("error", (err) => {
        // The service may answer (413) and close before taking the whole body: its answer wins.
        if (!answered) reject(new UnreachableError(this.address.url, err));
      });
      let sent = 0;
      const body = createReadStream(file.path);
      body.on("data", (chunk) => {
        sent += chunk.length;
        onProgress?.(sent, file.size);
      });
      body.on("error", (err) => req.destroy(err));
      body.pipe(req);
    });
  }
}
