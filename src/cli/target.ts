// Which service and endpoint a CLI command talks to, by the rule scripts follow too (svc/internal's target.ts;
// docs/cli.md, "Which service a command talks to"). SVC_APP / SVC_ENV (or --app / --env) name the app and
// environment. Every command says once on stderr which service it talks to.

import { chooseTarget, describeChoice, envSetting, findDevSession, readJson, storedProfiles, type TargetChoice } from "svc/internal";
import { namedProfile } from "../profiles.js";
import { UnreachableError, UserError } from "../errors.js";
import { appNameOf } from "../build/manifest.js";
import { chooseEnvironment, unknownEnvironment } from "../deploy/names.js";
import { didYouMean } from "./suggest.js";

/** Endpoint ids are 16 lowercase hex digits (a hash of owner, app, environment and name, or random). */
const ENDPOINT_ID = /^[0-9a-f]{16}$/;

export interface ServiceTarget {
  url: string;
  apiKey?: string;
  app?: string;
  env?: string;
  source: TargetChoice["source"];
  /** The profile's name, when source is "profile". */
  profile?: string;
}

let announced = false;
/**
 * Under --json the target is not announced: stderr then carries one JSON object on an error and nothing else
 * (main.ts decides before a command runs).
 */
export function announceTargets(enabled: boolean): void {
  announced = !enabled;
}

/** Says once a run, on stderr, which service this command talks to and why (never on stdout: results go there). */
export function announceTarget(choice: { url: string; source?: TargetChoice["source"]; profile?: string }): void {
  if (announced || choice.source === undefined || process.env.SVC_QUIET_TARGET === "1") return;
  announced = true;
  process.stderr.write(`service: ${choice.url} (${describeChoice({ ...choice, source: choice.source })})\n`);
}

export function serviceTarget(opts: { app?: string; env?: string; quiet?: boolean } = {}): ServiceTarget {
  const session = findDevSession();
  const env = opts.env ?? envSetting("SVC_ENV");
  const choice = chooseTarget({ apiUrl: envSetting("SVC_API_URL"), apiKey: envSetting("SVC_API_KEY"), ...storedProfiles(namedProfile()), session, env });
  if (!opts.quiet) announceTarget(choice);
  if (choice.source === "dev-session" && session) {
    return { url: choice.url, apiKey: choice.apiKey, app: opts.app ?? session.app, env: opts.env ?? session.env, source: "dev-session" };
  }
  return {
    url: choice.url,
    apiKey: choice.apiKey,
    app: opts.app ?? envSetting("SVC_APP"),
    env: opts.env ?? envSetting("SVC_ENV"),
    source: choice.source,
    ...(choice.profile !== undefined ? { profile: choice.profile } : {}),
  };
}

export async function apiFetch(target: ServiceTarget, path: string, init: RequestInit = {}): Promise<Response> {
  const url = `${target.url.replace(/\/+$/, "")}${path}`;
  const headers = new Headers(init.headers);
  if (target.apiKey) headers.set("authorization", `Bearer ${target.apiKey}`);
  try {
    return await fetch(url, { ...init, headers });
  } catch (err) {
    throw new UnreachableError(target.url, err);
  }
}

export interface EndpointRef {
  id: string;
  name: string;
  url: string;
}

/** Resolve an endpoint given by name (in the target's app/environment) or by id. */
export async function resolveEndpointRef(target: ServiceTarget, nameOrId: string): Promise<EndpointRef> {
  const session = target.source === "dev-session" ? findDevSession() : undefined;
  const fromSession = session?.endpoints[nameOrId];
  if (fromSession) return { id: fromSession.id, name: nameOrId, url: fromSession.url };
  if (target.app && target.env) {
    const response = await apiFetch(target, `/v1/apps/${encodeURIComponent(target.app)}/environments/${encodeURIComponent(target.env)}`);
    if (response.status === 404) {
      // A mistyped --env: the environments the app has say which was meant (an unknown app stays the 404 it is).
      const listed = await apiFetch(target, `/v1/apps/${encodeURIComponent(target.app)}/environments`);
      if (listed.ok)
        throw unknownEnvironment(
          target.app,
          target.env,
          (await readJson<{ environments: Array<{ env: string }> }>(listed)).environments.map((e) => e.env),
        );
    }
    const env = await readJson<{ endpoints: Array<{ id: string; name: string; url: string }> }>(response);
    const found = env.endpoints.find((e) => e.name === nameOrId || e.id === nameOrId);
    if (found) return found;
    throw new UserError(
      `No endpoint "${nameOrId}" in app "${target.app}", environment "${target.env}"${didYouMean(
        nameOrId,
        env.endpoints.map((e) => e.name),
      )}`,
      {
        hint: `It has: ${env.endpoints.map((e) => e.name).join(", ") || "no endpoints"}.`,
      },
    );
  }
  if (ENDPOINT_ID.test(nameOrId)) return { id: nameOrId, name: nameOrId, url: `${target.url}/v2/${nameOrId}` };
  // A name of this project's endpoint, as `svc update` and `svc undeploy` take it: the app of package.json,
  // the environment named by --env or the app's only one.
  const app = target.app ?? appNameOf(process.cwd());
  const listed = await apiFetch(target, `/v1/apps/${encodeURIComponent(app)}/environments`);
  if (listed.status !== 404) {
    const { environments } = await readJson<{ environments: Array<{ env: string }> }>(listed);
    const env = chooseEnvironment(
      target.env,
      environments.map((e) => e.env),
      app,
      "svc logs",
    );
    if (environments.some((e) => e.env === env)) return resolveEndpointRef({ ...target, app, env }, nameOrId);
    throw unknownEnvironment(
      app,
      env,
      environments.map((e) => e.env),
    );
  }
  throw new UserError(`Cannot tell which app "${nameOrId}" belongs to`, {
    hint: "Run this inside a project with `svc dev` running, or pass --app and --env (or set SVC_APP and SVC_ENV), or give the endpoint id.",
  });
}

/**
 * How a printed command gets the key this run used, in the shell it is printed in: `$SVC_API_KEY` when the shell
 * has exactly that key exported, else a command substitution of `svc whoami --key` (the profile's key, or the
 * one .env holds), named as this run was (`npx svc` from a project's node_modules, the profile given by flag).
 * Pure.
 */
export function keyForShell(opts: { key: string | undefined; exported: string | undefined; invokedAs: string; cwd: string; profileFlag?: string }): string {
  if (opts.key === undefined || (opts.exported !== undefined && opts.exported !== "" && opts.exported === opts.key)) return "$SVC_API_KEY";
  // A project's own svc-cli (<project>/node_modules/..., the project at or above the working directory) is not on
  // PATH: npx finds it. A global install is.
  const at = opts.invokedAs.replace(/\\/g, "/").indexOf("/node_modules/");
  const project = at === -1 ? undefined : opts.invokedAs.slice(0, at);
  const local = project !== undefined && (opts.cwd === project || opts.cwd.startsWith(`${project}/`) || opts.cwd.startsWith(`${project}\\`));
  const svc = local ? "npx svc" : "svc";
  const profile = opts.profileFlag ? ` --profile ${opts.profileFlag}` : "";
  return `$(${svc}${profile} whoami --key)`;
}
