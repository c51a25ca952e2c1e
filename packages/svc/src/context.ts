// Where does a call to an endpoint function go? Inside a worker (the runtime registered itself): its own endpoint
// in-process, peers through the service. Elsewhere (a script), the service the CLI's rule picks (target.ts): SVC_API_URL,
// a profile, or a running `svc dev` session of this project (.svc/dev-session.json, found from the working directory
// up), and there the app (SVC_APP, else package.json's name) in SVC_ENV (else the app's only environment).
// Nothing of these: a clear error that says how to get a context.

import { existsSync, readFileSync } from "node:fs";
import { parse as parseDotEnv } from "dotenv";
import { dirname, join } from "node:path";
import { UnreachableError, UserError } from "./errors.js";
import { readJson } from "./jobs-client.js";
import { processAlive } from "./process-alive.js";
import { chooseTarget, DEFAULT_API_URL, storedProfiles, type TargetChoice } from "./target.js";

export const RUNTIME_KEY = Symbol.for("svc.runtime");
export const DEV_SESSION_FILE = join(".svc", "dev-session.json");
export { DEFAULT_API_URL };
/** The spec's peer endpoint address cache. */
export const PEER_CACHE_MS = 300_000;

/** What the worker runtime registers on globalThis before it loads a handler. */
export interface RuntimeContext {
  endpointName: string;
  endpointId: string;
  app?: string;
  env?: string;
  apiUrl: string;
  apiKey?: string;
  /** Run a function of this worker's own endpoint in-process (class methods use it). */
  invokeLocal?(endpointName: string, functionName: string, input: unknown): unknown;
}

export function currentRuntime(): RuntimeContext | undefined {
  return (globalThis as { [RUNTIME_KEY]?: RuntimeContext })[RUNTIME_KEY];
}

export function setRuntime(context: RuntimeContext | undefined): void {
  (globalThis as { [RUNTIME_KEY]?: RuntimeContext })[RUNTIME_KEY] = context;
}

/** Written by `svc dev` while it runs. */
export interface DevSession {
  pid: number;
  url: string;
  apiKey: string;
  app: string;
  env: string;
  endpoints: Record<string, { id: string; url: string }>;
}

export interface EndpointTarget {
  /** The endpoint's job API address, `{queue_base_url}/v2/{endpoint_id}`. */
  url: string;
  apiKey?: string;
}

export class NoContextError extends UserError {
  constructor(endpointName: string) {
    super(`Cannot call endpoint "${endpointName}": there is no svc context to run it in`, {
      hint:
        "Start `svc dev` in this project and run the script again, or set SVC_APP and SVC_ENV " +
        "(after `svc login`, or with SVC_API_URL and SVC_API_KEY) to call a deployed app.",
    });
  }
}

/** The live dev session of the project containing `from`, if any. */
export function findDevSession(from = process.cwd()): DevSession | undefined {
  const explicit = process.env.SVC_DEV_SESSION;
  const candidates: string[] = [];
  if (explicit) candidates.push(explicit);
  for (let dir = from; ; dir = dirname(dir)) {
    candidates.push(join(dir, DEV_SESSION_FILE));
    if (dirname(dir) === dir) break;
  }
  for (const file of candidates) {
    if (!existsSync(file)) continue;
    try {
      const session = JSON.parse(readFileSync(file, "utf8")) as DevSession;
      if (processAlive(session.pid)) return session;
    } catch {
      // a half-written or stale file: keep looking
    }
  }
  return undefined;
}

/**
 * Read SVC_* settings from the environment, falling back to a .env file in the working directory. An empty value
 * is no setting, in either place: a .env copied from a template's .env.example (`SVC_API_URL=`) and not filled
 * in yet must not point svc at an empty address.
 */
export function envSetting(name: string): string | undefined {
  const value = process.env[name];
  if (value !== undefined && value !== "") return value;
  const fromFile = readDotEnv(process.cwd())[name];
  return fromFile === "" ? undefined : fromFile;
}

const dotEnvCache = new Map<string, Record<string, string>>();
/**
 * The `.env` file of `dir` as dotenv reads it (the syntax users know from every other tool: inline comments,
 * quotes, `export`, multi-line values; the last of a repeated key wins). Read once per directory.
 */
export function readDotEnv(dir: string): Record<string, string> {
  const cached = dotEnvCache.get(dir);
  if (cached) return cached;
  const file = join(dir, ".env");
  const values = existsSync(file) ? parseDotEnv(readFileSync(file, "utf8")) : {};
  dotEnvCache.set(dir, values);
  return values;
}

interface CachedPeer {
  target: EndpointTarget;
  expires: number;
}
const peerCache = new Map<string, CachedPeer>();

/** Forget cached peer addresses (tests, and after a redeploy in the same process). */
export function clearPeerCache(): void {
  peerCache.clear();
}

/**
 * Look up an endpoint of a deployed app through the service's state API, caching the address for 300 s.
 * A failed refresh keeps the cached address.
 */
const isLoopbackHost = (host: string) => host === "localhost" || host === "[::1]" || /^127\./.test(host);

/**
 * A peer on the service host's loopback is out of reach for a worker in a container, which reaches the service
 * through another address (svc-api, docs/docker.md): the same path at the address the lookup went to. Pure.
 */
export function reachablePeerUrl(apiUrl: string, peerUrl: string): string {
  const peer = new URL(peerUrl);
  if (!isLoopbackHost(peer.hostname) || isLoopbackHost(new URL(apiUrl).hostname)) return peerUrl;
  return `${apiUrl.replace(/\/+$/, "")}${peer.pathname}${peer.search}`;
}

async function lookupDeployed(app: string, env: string, endpointName: string, apiUrl: string, apiKey?: string) {
  const key = `${apiUrl}|${app}|${env}|${endpointName}`;
  const cached = peerCache.get(key);
  if (cached && cached.expires > Date.now()) return cached.target;
  try {
    const response = await fetch(`${apiUrl.replace(/\/+$/, "")}/v1/apps/${encodeURIComponent(app)}/environments/${encodeURIComponent(env)}`, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    }).catch((err: unknown) => {
      throw new UnreachableError(apiUrl, err);
    });
    const environment = await readJson<{ endpoints: Array<{ name: string; id: string; url: string }> }>(response);
    const found = environment.endpoints.find((e) => e.name === endpointName);
    if (!found) {
      throw new UserError(`Endpoint "${endpointName}" is not deployed in app "${app}", environment "${env}"`, {
        hint: `Deploy it with \`svc deploy --env ${env}\`.`,
      });
    }
    const target = { url: reachablePeerUrl(apiUrl, found.url), apiKey };
    peerCache.set(key, { target, expires: Date.now() + PEER_CACHE_MS });
    return target;
  } catch (err) {
    if (cached) return cached.target;
    throw err;
  }
}

function appFromProject(dir = process.cwd()): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    const pkg = join(d, "package.json");
    if (existsSync(pkg)) {
      try {
        const name = (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name;
        if (name) return name.replace(/^@[^/]+\//, "");
      } catch {
        return undefined;
      }
    }
    if (dirname(d) === d) return undefined;
  }
}

/** Resolve where a call to `endpointName` goes, or throw NoContextError. */
export async function resolveEndpoint(endpointName: string): Promise<EndpointTarget> {
  const runtime = currentRuntime();
  const apiKey = envSetting("SVC_API_KEY");
  if (runtime) {
    const app = runtime.app ?? envSetting("SVC_APP");
    const env = runtime.env ?? envSetting("SVC_ENV");
    if (app && env) return lookupDeployed(app, env, endpointName, runtime.apiUrl, runtime.apiKey ?? apiKey);
  }
  const session = findDevSession();
  const env = envSetting("SVC_ENV");
  const choice = chooseTarget({
    apiUrl: envSetting("SVC_API_URL"),
    apiKey,
    ...storedProfiles(process.env.SVC_PROFILE || undefined),
    session,
    env,
  });
  if (choice.source === "dev-session" && session) {
    const found = session.endpoints[endpointName];
    if (!found) {
      throw new UserError(`Endpoint "${endpointName}" is not part of the running svc dev session (${session.app})`, {
        hint: `It serves: ${Object.keys(session.endpoints).join(", ") || "nothing"}. Is the function in this project?`,
      });
    }
    return { url: found.url, apiKey: session.apiKey };
  }
  const app = envSetting("SVC_APP") ?? appFromProject();
  // Nothing configured at all (no address, no profile, no environment named): no context, rather than a guess.
  if (app === undefined || (choice.source === "default" && env === undefined)) throw new NoContextError(endpointName);
  return lookupDeployed(app, env ?? (await onlyEnvironment(app, choice)), endpointName, choice.url, choice.apiKey);
}

/** The app's one environment on the chosen service, when SVC_ENV names none; several are an error naming them. */
async function onlyEnvironment(app: string, choice: TargetChoice): Promise<string> {
  const response = await fetch(`${choice.url}/v1/apps/${encodeURIComponent(app)}/environments`, {
    headers: choice.apiKey ? { authorization: `Bearer ${choice.apiKey}` } : {},
  }).catch((err: unknown) => {
    throw new UnreachableError(choice.url, err);
  });
  const { environments } = await readJson<{ environments: Array<{ env: string }> }>(response);
  if (environments.length === 1) return environments[0]!.env;
  throw new UserError(`Cannot tell which environment of app "${app}" to call`, {
    hint:
      environments.length === 0
        ? `App "${app}" has no environment on ${choice.url}: deploy it with \`svc deploy --env <name>\`.`
        : `Set SVC_ENV to one of: ${environments.map((e) => e.env).join(", ")}.`,
  });
}
