// What an endpoint is, as rows: its stable id, the engine's view of it, and which rows a deploy writes. Pure
// functions shared by the deploy routes, `svc dev`'s deploy and the composition root (index.ts), which
// nothing else imports.

import { createHash } from "node:crypto";
import { endpointImageOf, type ManifestResource } from "svc/internal";
import type { EngineEndpoint } from "../engine/index.js";
import type { EndpointRow } from "../store/types.js";

/** Same owner, app, environment and name: same id, across restarts. Lowercase hex, 16 characters. */
export function endpointId(userId: string, app: string, env: string, name: string): string {
  return createHash("sha256").update(`${userId}\0${app}\0${env}\0${name}`).digest("hex").slice(0, 16);
}

export function engineEndpoint(row: EndpointRow): EngineEndpoint {
  const r = row.resource;
  return {
    id: row.id,
    userId: row.userId,
    type: row.type,
    retries: r.retries,
    ...(r.retryBackoff ? { backoff: { ...r.retryBackoff } } : {}),
    executionTimeoutMs: r.executionTimeoutMs,
    maxConcurrency: r.maxConcurrency,
    functions: r.functions.map((f) => f.name),
  };
}

/** Templates whose image is svc code: `svc://<app endpoint id>` (management/endpoint-plan.ts). */
const CODE_IMAGE = "svc://";

/**
 * Whether the endpoint's OpenAI routes are passed through to its workers (docs/llm.md, "Pass-through"): a queue
 * endpoint running an image (a REST endpoint whose template image is not `svc://`), whose workers answer OpenAI's
 * routes themselves as the provider's vLLM workers do, or one whose code declares `openaiPassthrough: true`.
 */
export function passesOpenAiThrough(row: EndpointRow): boolean {
  if (row.type !== "queue") return false;
  if (row.resource.openaiPassthrough === true) return true;
  const image = row.resource.imageName;
  return row.artifactPath === "" && image !== "" && !image.startsWith(CODE_IMAGE);
}

/** Which endpoints a deploy creates, updates, keeps and removes. Pure. */
export function planDeploy(
  existing: EndpointRow[],
  input: { userId: string; app: string; env: string; resources: Record<string, ManifestResource>; artifactPath: string; artifactHash: string },
  now: number,
): { upsert: EndpointRow[]; remove: EndpointRow[]; changed: string[] } {
  const mine = existing.filter((e) => e.userId === input.userId && e.app === input.app && e.env === input.env);
  const upsert: EndpointRow[] = [];
  const changed: string[] = [];
  for (const [name, resource] of Object.entries(input.resources)) {
    const id = endpointId(input.userId, input.app, input.env, name);
    // The endpoint's own code hash (and configuration) decides when its workers are replaced; an artifact without
    // one (an older build) replaces them on any change of the artifact.
    const revision = createHash("sha256")
      .update(JSON.stringify(resource))
      // An image endpoint runs no code of the artifact: its image and settings alone are what it runs.
      .update(resource.codeHash || endpointImageOf(resource) ? "" : input.artifactHash)
      .digest("hex")
      .slice(0, 16);
    const before = mine.find((e) => e.id === id);
    if (before && before.revision !== revision) changed.push(id);
    upsert.push({
      id,
      userId: input.userId,
      app: input.app,
      env: input.env,
      name,
      type: resource.is_load_balanced ? "lb" : "queue",
      resource,
      artifactPath: input.artifactPath,
      revision,
      createdAt: before?.createdAt ?? now,
      updatedAt: before && before.revision === revision ? before.updatedAt : now,
      completed: before?.completed ?? 0,
      failed: before?.failed ?? 0,
      retried: before?.retried ?? 0,
    });
  }
  const names = new Set(Object.keys(input.resources));
  const remove = mine.filter((e) => !names.has(e.name));
  return { upsert, remove, changed };
}
