// What the management routes share: their store, the data-center configuration, the rate limiter, and the
// access rules of management scopes.

import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import type { Principal } from "../auth.js";
import type { EngineEndpoint } from "../engine.js";
import { HttpProblem, isPlainObject, parseJson, readBody } from "../http.js";
import type { RateLimiting } from "../ratelimit.js";
import type { EndpointRow } from "../store/types.js";
import type { DataCenterConfig } from "./datacenters.js";
import type { ManagementStore, VolumeRecord } from "./store.js";

export interface ManagementContext {
  store: ManagementStore;
  dataDir: string;
  dataCenters: DataCenterConfig;
  limiter: RateLimiting;
  /** The user whose admin keys may act for other users (create their keys): the service's operator. */
  operatorUser: string;
  engineEndpoint(row: EndpointRow): EngineEndpoint;
}

export type ManagementFamily = "volumes" | "endpoints" | "templates" | "keys" | "secrets" | "gpus";

/**
 * 403 unless the key may do this. Management reads need `management:read`, `management:write` or `admin`;
 * writes need `management:write` or `admin`; keys need `admin`. Worker tokens and job-only keys get nothing.
 */
export function requireAccess(p: Principal, family: ManagementFamily, write: boolean): void {
  if (p.worker) throw new HttpProblem(403, "A worker token cannot call the management API");
  const s = p.scopes;
  if (s.includes("admin")) return;
  if (family === "keys") throw new HttpProblem(403, "Managing API keys needs a key with the admin scope");
  if (write ? s.includes("management:write") : s.includes("management:read") || s.includes("management:write")) return;
  throw new HttpProblem(403, `This API key may not ${write ? "change" : "read"} ${family} (it needs the ${write ? "management:write" : "management:read"} scope)`);
}

export function volumeDir(dataDir: string, volumeId: string): string {
  return join(dataDir, "volumes", volumeId);
}

/** The volume an endpoint's `volume` setting names: one of its owner's volumes, by id, else by name. */
export function resolveVolume(volumes: VolumeRecord[], userId: string, ref: string): VolumeRecord | undefined {
  const mine = volumes.filter((v) => v.userId === userId);
  return mine.find((v) => v.id === ref) ?? mine.find((v) => v.name === ref);
}

/** A management request body: JSON object required (400 otherwise). */
export async function readObjectBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = parseJson(await readBody(req, 1024 * 1024));
  if (body === undefined) throw new HttpProblem(400, "This request needs a JSON object body");
  if (!isPlainObject(body)) throw new HttpProblem(400, "The request body must be a JSON object");
  return body;
}
