// What activating a build, or applying configuration from code, does to an environment's endpoints.
// Pure functions: routes.ts applies their result.

import { gpuCountOf } from "../../gpus/allocate.js";
import type { Manifest, ManifestResource } from "svc/internal";
import { planDeploy } from "../endpoints/rows.js";
import type { EndpointRow } from "../store/types.js";
import type { BuildRow } from "../store/deploy-rows.js";

export type EndpointAction = "create" | "update" | "unchanged";

export interface PlannedEndpoint {
  name: string;
  id: string;
  type: "queue" | "lb";
  action: EndpointAction;
  /** For load-balanced endpoints: "METHOD /path" routes. */
  routes: string[];
}

export interface ActivationPlan {
  endpoints: PlannedEndpoint[];
  remove: Array<{ name: string; id: string }>;
  /** Rows to write for create/update; unchanged endpoints keep their row (and their workers). */
  upsert: EndpointRow[];
  removeRows: EndpointRow[];
}

/**
 * Activating `build` in an environment: one endpoint per manifest resource. When the source fingerprint and
 * an endpoint's resource are those it already runs, the endpoint is left exactly as it is (no restart).
 */
export function planActivation(
  existing: EndpointRow[],
  input: { userId: string; app: string; env: string; build: BuildRow; current?: BuildRow; artifactPath: string },
  now: number,
): ActivationPlan {
  const { build, current } = input;
  const base = planDeploy(
    existing,
    {
      userId: input.userId,
      app: input.app,
      env: input.env,
      resources: build.manifest.resources,
      artifactPath: input.artifactPath,
      artifactHash: build.id,
    },
    now,
  );
  // Same sources built by the same svc: the running workers already serve this code.
  const sameSources = current !== undefined && current.fingerprint === build.fingerprint && current.manifest.svcVersion === build.manifest.svcVersion;
  const endpoints: PlannedEndpoint[] = [];
  const upsert: EndpointRow[] = [];
  for (const row of base.upsert) {
    const before = existing.find((e) => e.id === row.id);
    const routes = Object.keys((Object.hasOwn(build.manifest.routes, row.name) ? build.manifest.routes[row.name] : undefined) ?? {}).sort();
    let action: EndpointAction;
    if (!before) action = "create";
    else if (before.revision === row.revision) action = "unchanged";
    else if (sameSources && JSON.stringify(before.resource) === JSON.stringify(row.resource)) action = "unchanged";
    else action = "update";
    endpoints.push({ name: row.name, id: row.id, type: row.type, action, routes });
    if (action !== "unchanged") upsert.push(row);
  }
  endpoints.sort((a, b) => a.name.localeCompare(b.name));
  return {
    endpoints,
    remove: base.remove.map((r) => ({ name: r.name, id: r.id })).sort((a, b) => a.name.localeCompare(b.name)),
    upsert,
    removeRows: base.remove,
  };
}

/** Configuration `svc update` may change without a new build. */
export const CONFIG_FIELDS = [
  "workersMin",
  "workersMax",
  "gpuIds",
  "gpuTypeIds",
  "gpuCount",
  "computeType",
  "instanceIds",
  "env",
  "idleTimeout",
  "scaler",
  "retries",
  "retryBackoff",
  "openaiPassthrough",
] as const;
/** Of those, the ones whose change restarts workers (the spec: editing GPU types or worker counts). */
export const RESTART_FIELDS: ReadonlySet<string> = new Set(["workersMin", "workersMax", "gpuIds", "gpuTypeIds", "gpuCount", "computeType", "instanceIds"]);

export interface ConfigChange {
  name: string;
  id: string;
  changed: string[];
  restart: boolean;
}

export interface ConfigPlan {
  changes: ConfigChange[];
  rows: EndpointRow[];
  /** Why this cannot be a configuration-only update (then `svc deploy` is needed). */
  problems: string[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Apply the configuration fields of `resources` (from code) to the deployed endpoints of one environment. */
export function planConfigUpdate(existing: EndpointRow[], resources: Manifest["resources"], now: number): ConfigPlan {
  const problems: string[] = [];
  const changes: ConfigChange[] = [];
  const rows: EndpointRow[] = [];
  const names = new Set(Object.keys(resources));
  for (const name of [...names].sort()) {
    const row = existing.find((e) => e.name === name);
    const wanted = resources[name]!;
    if (!row) {
      problems.push(`endpoint "${name}" is in the code but not deployed`);
      continue;
    }
    const functionsOf = (r: ManifestResource) => r.functions.map((f) => f.name).sort();
    // Load-balanced endpoints deployed before manifests listed their route handlers have none: nothing to compare.
    const unlisted = row.resource.is_load_balanced && row.resource.functions.length === 0;
    if ((!unlisted && !same(functionsOf(row.resource), functionsOf(wanted))) || row.resource.is_load_balanced !== wanted.is_load_balanced) {
      problems.push(`endpoint "${name}" serves other functions in the code than deployed`);
      continue;
    }
    // A manifest from before gpuCount existed means what gpuCountOf reads it as, not a change.
    const field = (r: ManifestResource, f: (typeof CONFIG_FIELDS)[number]) => (f === "gpuCount" ? gpuCountOf(r) : r[f]);
    const changed = CONFIG_FIELDS.filter((f) => !same(field(row.resource, f), field(wanted, f)));
    if (changed.length === 0) continue;
    const restart = changed.some((f) => RESTART_FIELDS.has(f));
    const resource: ManifestResource = { ...row.resource };
    for (const f of changed) (resource as unknown as Record<string, unknown>)[f] = wanted[f];
    // A new revision is what makes the scaler replace workers; other changes keep the running ones.
    const revision = restart ? `${row.revision.slice(0, 8)}${(now % 0xffffffff).toString(16).padStart(8, "0")}` : row.revision;
    changes.push({ name, id: row.id, changed: [...changed], restart });
    rows.push({ ...row, resource, revision, updatedAt: now });
  }
  for (const row of existing) {
    if (!names.has(row.name)) problems.push(`endpoint "${row.name}" is deployed but no longer in the code`);
  }
  return { changes, rows, problems };
}
