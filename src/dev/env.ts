// Secrets in `svc dev` as other tools' dev servers do it: a secret an endpoint names (`secrets: ["HF_TOKEN"]`)
// comes from the dev service's own secrets when one is set there (`svc secret set`), else from the process
// environment, `.env.local` or `.env` (in that order: what is exported wins, as with dotenv). What dev takes from
// there it sets on the dev service for app/environment "dev", remembers as its own (a file in the data
// directory), and updates or removes when the files change; a secret set by hand is never touched.

import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseDotEnv } from "dotenv";
import type { Manifest } from "svc/internal";
import { UserError } from "../errors.js";

/** The files `svc dev` reads variables from, and watches even when .gitignore names them. */
export const DEV_ENV_FILES = [".env", ".env.local"] as const;

/** The project's variables: `.env`, then `.env.local` over it, then the process environment over both. */
export function projectEnv(root: string, processEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of DEV_ENV_FILES) {
    const file = join(root, name);
    if (existsSync(file)) Object.assign(values, parseDotEnv(readFileSync(file, "utf8")));
  }
  for (const [k, v] of Object.entries(processEnv)) if (v !== undefined && v !== "") values[k] = v;
  return values;
}

/** The secrets a build's endpoints name, sorted, each once. Pure. */
export function namedSecrets(manifest: Pick<Manifest, "resources">): string[] {
  return [...new Set(Object.values(manifest.resources).flatMap((r) => r.secrets ?? []))].sort();
}

const fingerprint = (value: string) => createHash("sha256").update(value).digest("hex");

export interface DevSecretPlan {
  /** Values to set for app/environment "dev" (new, or changed since dev set them). */
  set: Array<{ name: string; value: string }>;
  /** Secrets dev set earlier that no file or variable gives any more. */
  remove: string[];
  /** Named, set nowhere. */
  missing: string[];
  /** Name -> fingerprint of the value dev has set, after the plan is carried out. */
  ours: Record<string, string>;
}

/**
 * What to change on the dev service. `setByHand`: names the service has from `svc secret set` (any scope);
 * `ours`: what dev set before (name -> fingerprint). Pure.
 */
export function planDevSecrets(
  named: readonly string[],
  values: Record<string, string>,
  setByHand: ReadonlySet<string>,
  ours: Record<string, string>,
): DevSecretPlan {
  const plan: DevSecretPlan = { set: [], remove: [], missing: [], ours: {} };
  for (const name of named) {
    if (setByHand.has(name)) {
      // Set by hand since: that value is the one (dev's own, more specific, would hide it).
      if (ours[name] !== undefined) plan.remove.push(name);
      continue;
    }
    const value = values[name];
    if (value === undefined) {
      if (ours[name] !== undefined) plan.remove.push(name);
      plan.missing.push(name);
      continue;
    }
    plan.ours[name] = fingerprint(value);
    if (ours[name] !== plan.ours[name]) plan.set.push({ name, value });
  }
  // Ones no endpoint names any more: forgotten too (no value of the user's lingers in the dev service).
  for (const name of Object.keys(ours)) if (!named.includes(name) && !plan.remove.includes(name)) plan.remove.push(name);
  return plan;
}

/** Named secrets set nowhere: the session runs on (nothing of the release served), the next save or .env edit retries. */
export class DevSecretsMissingError extends UserError {}

/** The refusal for named secrets set nowhere, with what to do in words a user can act on. Pure. */
export function missingSecretsError(app: string, missing: readonly string[]): DevSecretsMissingError {
  return new DevSecretsMissingError(`The project's endpoints name secrets that are not set: ${missing.join(", ")}`, {
    problems: missing.map(
      (name) =>
        `${name}: add \`${name}=...\` to .env (svc dev reloads it), export it before \`svc dev\`, or run \`svc secret set ${name} --app ${app} --env dev\` in this project while svc dev runs`,
    ),
  });
}

interface SecretRow {
  name: string;
  app: string | null;
  env: string | null;
}

const OURS_FILE = "dotenv-secrets.json";

async function readOurs(dataDir: string): Promise<Record<string, string>> {
  try {
    return JSON.parse(await readFile(join(dataDir, OURS_FILE), "utf8")) as Record<string, string>;
  } catch {
    return {}; // none set by dev yet
  }
}

/**
 * Carry the plan out against the dev service's management API (`url`, `apiKey`): the names it lacks are taken
 * from `values`. Returns the named secrets still set nowhere.
 */
export async function syncDevSecrets(opts: {
  url: string;
  apiKey: string;
  dataDir: string;
  app: string;
  manifest: Pick<Manifest, "resources">;
  values: Record<string, string>;
}): Promise<string[]> {
  const named = namedSecrets(opts.manifest);
  const ours = await readOurs(opts.dataDir);
  if (named.length === 0 && Object.keys(ours).length === 0) return [];
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${opts.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${opts.apiKey}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!res.ok && !(method === "DELETE" && res.status === 404)) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res;
  };
  const rows = (await (await call("GET", "/v1/secrets")).json()) as SecretRow[];
  // A row at app/env "dev" that dev set is dev's; any other row that applies to this app was set by hand.
  const byHand = new Set(
    rows
      .filter(
        (r) =>
          (r.app === null || r.app === opts.app) &&
          (r.env === null || r.env === "dev") &&
          !(r.app === opts.app && r.env === "dev" && ours[r.name] !== undefined),
      )
      .map((r) => r.name),
  );
  const plan = planDevSecrets(named, opts.values, byHand, ours);
  const scope = `?app=${encodeURIComponent(opts.app)}&env=dev`;
  for (const { name, value } of plan.set) await call("PUT", `/v1/secrets/${encodeURIComponent(name)}`, { value, app: opts.app, env: "dev" });
  for (const name of plan.remove) await call("DELETE", `/v1/secrets/${encodeURIComponent(name)}${scope}`);
  await writeFile(join(opts.dataDir, OURS_FILE), `${JSON.stringify(plan.ours)}\n`, { mode: 0o600 });
  return plan.missing;
}
