// The names a shell completes from the current context (`svc run <TAB>`): the endpoints of the `svc dev` session or
// of the app and environment the CLI targets, the apps on the service, an app's environments. Asked by the
// completion script through `svc __complete <kind>`, while a person waits at a prompt: each lookup is bounded by a
// short timeout, and a service that does not answer, refuses, or is not there gives no names rather than an error.

import { findDevSession } from "svc/internal";
import { appNameOf } from "../build/manifest.js";
import type { ServiceTarget } from "./target.js";

export type NameKind = "endpoint" | "app" | "env";
export const NAME_KINDS: readonly NameKind[] = ["endpoint", "app", "env"];

/** How long a completion waits for the service, all lookups together. */
export const COMPLETION_TIMEOUT_MS = 1000;

async function getJson<T>(target: ServiceTarget, path: string, signal: AbortSignal): Promise<T | undefined> {
  const headers: Record<string, string> = target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {};
  const res = await fetch(`${target.url.replace(/\/+$/, "")}${path}`, { headers, signal });
  return res.ok ? ((await res.json()) as T) : undefined;
}

const sortedUnique = (names: Iterable<string>) => [...new Set(names)].sort();

async function environmentsOf(target: ServiceTarget, app: string, signal: AbortSignal): Promise<string[]> {
  const body = await getJson<{ environments: Array<{ env: string }> }>(target, `/v1/apps/${encodeURIComponent(app)}/environments`, signal);
  return (body?.environments ?? []).map((e) => e.env);
}

async function lookup(kind: NameKind, target: ServiceTarget, cwd: string, signal: AbortSignal): Promise<string[]> {
  if (kind === "app") return ((await getJson<{ apps: Array<{ name: string }> }>(target, "/v1/apps", signal))?.apps ?? []).map((a) => a.name);
  const app = target.app ?? appNameOf(cwd);
  if (kind === "env") return environmentsOf(target, app, signal);
  if (target.source === "dev-session") {
    const session = findDevSession(cwd);
    if (session) return Object.keys(session.endpoints);
  }
  // The environment named, else every environment of the app: a name is completed wherever it is deployed.
  const envs = target.env ? [target.env] : await environmentsOf(target, app, signal);
  const lists = await Promise.all(
    envs.map(async (env) => {
      const body = await getJson<{ endpoints: Array<{ name: string }> }>(
        target,
        `/v1/apps/${encodeURIComponent(app)}/environments/${encodeURIComponent(env)}`,
        signal,
      );
      return (body?.endpoints ?? []).map((e) => e.name);
    }),
  );
  return lists.flat();
}

/**
 * The `kind` names the shell offers in this context, sorted. Never throws: completion must not print errors into
 * a person's command line, so every failure (no service, a refused key, no package.json to name the app, the
 * timeout) is no names.
 */
export async function completionNames(kind: NameKind, target: ServiceTarget, opts: { cwd?: string; timeoutMs?: number } = {}): Promise<string[]> {
  const signal = AbortSignal.timeout(opts.timeoutMs ?? COMPLETION_TIMEOUT_MS);
  try {
    return sortedUnique(await lookup(kind, target, opts.cwd ?? process.cwd(), signal));
  } catch {
    return [];
  }
}
