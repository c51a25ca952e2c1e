// What a manifest's endpoints may ask of their workers' environment, checked before a release is planned or
// activated (and before `svc update` applies configuration): no loader variables, no SVC_ names, in `env` or
// as a secret's name. Pure.

import { imageNameProblems, largeOutputProblems, LIMITS, type ManifestResource, reservedEnvProblems, scalingPolicyProblems } from "svc/internal";

/** One line per endpoint and refused variable; empty when every endpoint's environment may be set. */
export function reservedEnvInResources(resources: Record<string, ManifestResource>): string[] {
  const problems: string[] = [];
  for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
    // Shapes are checked where they are used; what is not an object or a list here names nothing.
    const env: unknown = resource?.env;
    const secrets: unknown = resource?.secrets;
    if (env && typeof env === "object") problems.push(...reservedEnvProblems(Object.keys(env), `endpoint "${name}": env `));
    if (Array.isArray(secrets)) problems.push(...reservedEnvProblems(secrets.map(String), `endpoint "${name}": secret `));
  }
  return problems;
}

/** One line per endpoint whose scaling policy is not one the scaler follows (the build checks it too). */
export function scalerProblemsInResources(resources: Record<string, ManifestResource>): string[] {
  const problems: string[] = [];
  for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const scaler: unknown = resource?.scaler;
    if (scaler !== undefined && scaler !== null) problems.push(...scalingPolicyProblems(scaler).map((p) => `endpoint "${name}": ${p}`));
  }
  return problems;
}

/**
 * One line per endpoint whose image fields are not what the build writes: an image endpoint (`protocol:
 * "provider"`) names a container image and no handler; its /dev/shm and disk sizes are whole numbers in bounds.
 */
export function imageProblemsInResources(resources: Record<string, ManifestResource>): string[] {
  const problems: string[] = [];
  for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const r = (resource ?? {}) as unknown as Partial<Record<string, unknown>>;
    const at = (p: string) => `endpoint "${name}": ${p}`;
    if (r.protocol !== undefined) {
      if (r.protocol !== "provider") problems.push(at(`"protocol" must be "provider" (an image endpoint's workers speak the provider's protocol)`));
      else {
        problems.push(...imageNameProblems(r.imageName, "imageName").map(at));
        if (r.is_load_balanced === true) problems.push(at("an image endpoint is a queue endpoint, not a load-balanced one"));
        if (r.handler !== "") problems.push(at('an image endpoint has no handler ("handler": "")'));
      }
    }
    const bounded = (key: string, min: number, max: number) => {
      const v = r[key];
      if (v === undefined) return;
      if (r.protocol !== "provider") problems.push(at(`"${key}" is for image endpoints only`));
      else if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) problems.push(at(`"${key}" must be an integer from ${min} to ${max}`));
    };
    bounded("shmSizeMb", LIMITS.shmSizeMbMin, LIMITS.shmSizeMbMax);
    bounded("containerDiskInGb", 0, LIMITS.containerDiskInGbMax);
  }
  return problems;
}

/** One line per endpoint whose `largeOutputBytes` is not a size in bytes, or has no network volume to write to. */
export function largeOutputProblemsInResources(resources: Record<string, ManifestResource>): string[] {
  const problems: string[] = [];
  for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1)))
    problems.push(...largeOutputProblems(resource?.largeOutputBytes, resource?.volume).map((p) => `endpoint "${name}": ${p}`));
  return problems;
}
