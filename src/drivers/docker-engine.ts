// Connecting to the Docker engine (dockerode), and turning its failures into errors a user can act on.

import type Docker from "dockerode";
import { errorMessage, UserError } from "../errors.js";

/** Labels every Docker object svc creates carries; `cleanupStale` and `svc images prune` select by them. */
export const LABELS = {
  managed: "svc.managed",
  app: "svc.app",
  env: "svc.env",
  endpoint: "svc.endpoint",
  session: "svc.session",
  worker: "svc.worker",
  /** A pre-booted worker container (docs/cold-start.md): no endpoint until one claims it. */
  pool: "svc.pool",
  volume: "svc.volume",
  imageKind: "svc.image.kind",
  imageHash: "svc.image.hash",
  version: "svc.version",
} as const;

export const START_ENGINE_HINT =
  "Start a Docker engine: run scripts/ensure-docker.sh as root (installs and starts dockerd), or `sudo dockerd &`; " +
  "or point DOCKER_HOST at a running engine.";

/** Where dockerode will connect, for messages. */
export function engineAddress(env: NodeJS.ProcessEnv = process.env): string {
  return env.DOCKER_HOST || "unix:///var/run/docker.sock";
}

/** The engine named by DOCKER_HOST (or the local socket), checked to answer within `timeoutMs`. */
export async function connectDocker(options: { docker?: Docker; timeoutMs?: number } = {}): Promise<Docker> {
  // dockerode (and the SSH client under it) loads on first use, not with every command that might talk to Docker.
  const docker = options.docker ?? new (await import("dockerode")).default();
  const timeoutMs = options.timeoutMs ?? 5000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      docker.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    throw new UserError(`No Docker engine answers at ${engineAddress()} (${errorMessage(err)})`, { hint: START_ENGINE_HINT, cause: err });
  } finally {
    clearTimeout(timer);
  }
  return docker;
}

/** True when an engine answers; never throws. */
export async function dockerAvailable(docker?: Docker, timeoutMs = 3000): Promise<boolean> {
  try {
    await connectDocker({ docker, timeoutMs });
    return true;
  } catch {
    return false;
  }
}

/** The HTTP status of a dockerode error (404 no such object, 409 conflict, 304 not modified...). */
export function dockerStatus(err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === "number" ? status : undefined;
}

/** The engine's own message from a dockerode error, without dockerode's "(HTTP code 500) server error -" prefix. */
export function dockerMessage(err: unknown): string {
  const json = (err as { json?: { message?: unknown } } | null)?.json;
  if (json && typeof json.message === "string") return json.message;
  return errorMessage(err).replace(/^\(HTTP code \d+\)\s*[^-]*-\s*/, "");
}

/** Label filters in the form the engine's list calls take: {label: ["k=v", ...]}. */
export function labelFilter(labels: Record<string, string>): { label: string[] } {
  return { label: Object.entries(labels).map(([key, value]) => (value === "" ? key : `${key}=${value}`)) };
}

/** A Docker object name part: lowercase letters, digits, '-', '_' and '.', starting with a letter or digit. */
export function dockerNamePart(value: string, maxLength = 40): string {
  const cleaned = value
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .replace(/-+$/, "")
    .slice(0, maxLength);
  return cleaned || "x";
}

/**
 * What `make` resolves to, made once per `key` and shared by every caller meanwhile; a failure is forgotten, so the
 * next call tries again. The driver's engine, images, networks, forwarders and volumes are each made so.
 */
export function memo<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let pending = cache.get(key);
  if (!pending) {
    pending = make();
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}
