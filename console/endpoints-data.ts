// The endpoints a user has, from the two public sources: endpoints created through the REST API
// (`GET /v1/endpoints`) and those of deployed apps (`GET /v1/apps` → environments). And their health.

import { api, ApiProblem } from "./api.js";
import type { CallableFunction } from "./forms.js";
import type { HealthAnswer } from "../src/service/http/answers.js";

export interface RestEndpoint {
  id: string;
  name: string;
  url: string;
  templateId: string;
  computeType: "GPU" | "CPU";
  gpuTypeIds: string[];
  gpuCount: number;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  env: Record<string, string>;
  networkVolumeId: string | null;
  executionTimeoutMs: number;
  scalerType?: string;
  scalerValue?: number;
  status: "READY" | "WAITING";
  statusReason: string | null;
  allocatedGpuType: string | null;
  createdAt: number;
}

export interface EndpointSummary {
  id: string;
  name: string;
  type: "queue" | "lb";
  source: "rest" | "app";
  app?: string;
  env?: string;
  workersMin: number;
  workersMax: number;
  status?: string;
  statusReason?: string | null;
  /** The GPU types asked for, in priority order (empty: a CPU endpoint, or any GPU). */
  gpuTypeIds: string[];
  rest?: RestEndpoint;
  /** App endpoints: the functions they serve, with example inputs. */
  functions?: CallableFunction[];
  /** Where callers reach it (a load-balanced endpoint's own address). */
  url?: string;
  /** App endpoints: their settings as deployed, and the build their environment runs. */
  deployed?: AppEndpoint;
  build?: string | null;
}

/** An endpoint's `/health`, as the service defines it. */
export type Health = HealthAnswer;

/**
 * What the endpoint page says of a crash loop (its workers keep dying, restarts back off): a headline and when
 * the next worker may start. Pure.
 */
export function crashLoopText(loop: NonNullable<HealthAnswer["crashLoop"]>, now: number): { headline: string; next: string } {
  const window = loop.windowMs % 60_000 === 0 ? `${loop.windowMs / 60_000} min` : `${Math.round(loop.windowMs / 1000)} s`;
  const next =
    loop.nextStartAt === null || loop.nextStartAt <= now
      ? "The next worker may start now."
      : `The next worker starts in ${Math.ceil((loop.nextStartAt - now) / 1000)} s; restarts back off while they keep dying.`;
  return { headline: `Workers keep dying: ${loop.deaths} in ${window}, last: ${loop.lastDeath.message}`, next };
}

export interface AppEnvironment {
  app: string;
  env: string;
  createdAt: number;
  activatedAt: number | null;
  build: string | null;
  fingerprint: string | null;
  endpoints: AppEndpoint[];
}

/** An endpoint as its environment lists it (`GET /v1/apps/{app}/environments/{env}`): its deployed settings. */
export interface AppEndpoint {
  name: string;
  id: string;
  url: string;
  type: "queue" | "lb";
  routes: string[];
  functions?: CallableFunction[];
  workersMin: number;
  workersMax: number;
  gpuTypeIds: string[];
  idleTimeout: number;
  computeType?: "GPU" | "CPU";
  gpuCount?: number;
  executionTimeoutMs?: number;
  maxConcurrency?: number;
  retries?: number;
  /** Names of the secrets its workers get (never their values). */
  secrets?: string[];
  /** null: the default policy (one worker per maxConcurrency jobs). */
  scaler?: { type: string; value: number } | null;
}

export async function loadAppEnvironments(): Promise<AppEnvironment[]> {
  const { apps } = await api<{ apps: Array<{ name: string }> }>("/v1/apps");
  const all: AppEnvironment[] = [];
  for (const app of apps) {
    const { environments } = await api<{ environments: AppEnvironment[] }>(`/v1/apps/${encodeURIComponent(app.name)}/environments`);
    all.push(...environments);
  }
  return all;
}

/**
 * One list of both sources: REST endpoints as they are, deployed ones (which `GET /v1/endpoints` names too, with
 * their status) from their apps, with app, environment and status. Pure.
 */
export function endpointSummaries(rest: RestEndpoint[], environments: AppEnvironment[]): EndpointSummary[] {
  const endpoints: EndpointSummary[] = [];
  // Deployed endpoints' status (WAITING for a GPU, and why), by id.
  const deployed = new Map<string, { status: string; statusReason: string | null }>();
  for (const e of rest) {
    if ((e as { source?: string }).source === "deploy") {
      deployed.set(e.id, { status: e.status, statusReason: e.statusReason });
      continue;
    }
    endpoints.push({
      id: e.id,
      name: e.name,
      type: "queue",
      source: "rest",
      workersMin: e.workersMin,
      workersMax: e.workersMax,
      status: e.status,
      statusReason: e.statusReason,
      gpuTypeIds: e.gpuTypeIds,
      rest: e,
      url: e.url,
    });
  }
  for (const env of environments) {
    for (const e of env.endpoints) {
      endpoints.push({
        id: e.id,
        name: e.name,
        type: e.type,
        source: "app",
        app: env.app,
        env: env.env,
        workersMin: e.workersMin,
        workersMax: e.workersMax,
        gpuTypeIds: e.gpuTypeIds,
        functions: e.functions,
        url: e.url,
        deployed: e,
        build: env.build,
        ...deployed.get(e.id),
      });
    }
  }
  return endpoints;
}

/** Both sources; a source the key may not read (403) is reported, not fatal. */
export async function loadEndpoints(): Promise<{ endpoints: EndpointSummary[]; notes: string[] }> {
  const notes: string[] = [];
  let rest: RestEndpoint[] = [];
  let environments: AppEnvironment[] = [];
  try {
    rest = await api<RestEndpoint[]>("/v1/endpoints");
  } catch (err) {
    if (!(err instanceof ApiProblem && err.status === 403)) throw err;
    notes.push(`Endpoints created in the console are hidden: ${err.detail}`);
  }
  try {
    environments = await loadAppEnvironments();
  } catch (err) {
    if (!(err instanceof ApiProblem && err.status === 403)) throw err;
    notes.push(`Some app endpoints are hidden: ${err.detail}`);
  }
  return { endpoints: endpointSummaries(rest, environments), notes };
}

export async function loadHealth(id: string): Promise<Health | null> {
  try {
    return await api<Health>(`/v2/${encodeURIComponent(id)}/health`);
  } catch {
    return null;
  }
}

/** An endpoint's record (`GET /v1/endpoints/{id}`, deployed endpoints too): the fields the endpoint page shows. */
export interface EndpointRecord {
  id: string;
  computeType: "GPU" | "CPU";
  gpuTypeIds: string[];
  gpuCount?: number;
  status: "READY" | "WAITING";
  statusReason: string | null;
  allocatedGpuType?: string | null;
  /** Each worker holding GPUs of this host: which (UUIDs), and as which type of gpuTypeIds. */
  workers?: Array<{ workerId: string; gpuType: string | null; gpus: string[] }>;
}

/** The record, or null where the key may not read it (a `jobs:*` key: 403). */
export async function loadRecord(id: string): Promise<EndpointRecord | null> {
  try {
    return await api<EndpointRecord>(`/v1/endpoints/${encodeURIComponent(id)}`);
  } catch (err) {
    if (err instanceof ApiProblem && err.status === 403) return null;
    throw err;
  }
}
