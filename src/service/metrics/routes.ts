// The routes of what the service tells of itself:
//   GET /metrics                         Prometheus' text format (the operator: an admin key or the `metrics` scope)
//   GET /v1/endpoints/{id}/metrics       the recent per-minute series behind an endpoint's charts (?window=1h|1d)
//   GET /v1/metrics                      the same added up over the caller's endpoints (the console's home page)
//   GET /v1/usage                        usage records by hour (?from&to; the operator may pass userId)
// docs/observability.md.

import type { Route, RouteCall } from "../http/router.js";
import type { EndpointRow } from "../store/types.js";
import { canUseJobs, DEFAULT_USER, isAdmin, type Principal } from "../keys/auth.js";
import { HttpProblem } from "../http/problems.js";
import { sendJson } from "../http/wire.js";
import type { ServiceMetrics, Window } from "./index.js";
import type { UsageRow } from "./usage-store.js";
import type { UsageAnswer } from "../http/answers.js";

export interface MetricsDeps {
  metrics?: ServiceMetrics;
  endpoints: ReadonlyMap<string, EndpointRow>;
}

/** The longest span one usage read covers. */
const USAGE_MAX_SPAN_MS = 366 * 24 * 3_600_000;
const HOUR_MS = 3_600_000;

/** Service-wide numbers are the operator's: an admin key or a `metrics` key of the service's default user. */
function requireOperatorMetrics(p: Principal): void {
  if (p.userId === DEFAULT_USER && (isAdmin(p) || p.scopes.includes("metrics"))) return;
  throw new HttpProblem(403, "Only the operator's admin key or a key with the metrics scope may read the service's metrics");
}

async function prometheusText(call: RouteCall<MetricsDeps>): Promise<void> {
  requireOperatorMetrics(call.principal);
  const prometheus = call.ctx.metrics?.prometheus;
  if (!prometheus) throw new HttpProblem(404, "Metrics are turned off on this service (SVC_METRICS=off)");
  const text = await prometheus.text();
  call.res.writeHead(200, { "content-type": prometheus.contentType, "content-length": Buffer.byteLength(text) });
  call.res.end(text);
}

/** Whether the key may read this endpoint's series: one that may use its jobs, or a `metrics` key. */
function canReadSeries(p: Principal, endpointId: string): boolean {
  return canUseJobs(p, endpointId) || (!p.worker && p.scopes.includes("metrics"));
}

function windowParam(query: URLSearchParams): Window {
  const window = query.get("window") ?? "1h";
  if (window !== "1h" && window !== "1d") throw new HttpProblem(400, "window must be 1h or 1d", { errors: ["window: must be 1h or 1d"] });
  return window;
}

function recentOf(call: RouteCall<MetricsDeps>) {
  const recent = call.ctx.metrics?.recent;
  if (!recent) throw new HttpProblem(404, "Metrics are turned off on this service (SVC_METRICS=off)");
  return recent;
}

const SINCE = "the service's start (kept in memory)";

async function endpointSeries(call: RouteCall<MetricsDeps>): Promise<void> {
  const id = call.params.endpoint!;
  const endpoint = call.ctx.endpoints.get(id);
  if (!endpoint || endpoint.userId !== call.principal.userId) throw new HttpProblem(404, `No endpoint ${id}`);
  if (!canReadSeries(call.principal, id)) throw new HttpProblem(403, `This API key has no access to endpoint ${id}`);
  const window = windowParam(call.url.searchParams);
  // The endpoint's type says which numbers apply (a load-balanced endpoint has requests and latency, no jobs).
  sendJson(call.res, { endpointId: id, endpointType: endpoint.type, ...recentOf(call).series(id, window), since: SINCE });
}

/**
 * The endpoints whose series a key reads added up: its user's that it may read; the operator's (an admin or
 * `metrics` key of the default user) every user's, as `/metrics` shows them. Pure.
 */
export function seriesEndpoints(p: Principal, endpoints: Iterable<EndpointRow>): string[] {
  const operator = !p.worker && p.userId === DEFAULT_USER && (isAdmin(p) || p.scopes.includes("metrics"));
  const ids: string[] = [];
  for (const e of endpoints) if (operator || (e.userId === p.userId && canReadSeries(p, e.id))) ids.push(e.id);
  return ids.sort();
}

async function allSeries(call: RouteCall<MetricsDeps>): Promise<void> {
  const window = windowParam(call.url.searchParams);
  const recent = recentOf(call);
  const ids = seriesEndpoints(call.principal, call.ctx.endpoints.values());
  sendJson(call.res, { endpointIds: ids, ...recent.series(ids, window), since: SINCE });
}

/** An epoch-ms or ISO time of the query, or the default. */
function timeParam(query: URLSearchParams, name: string, fallback: number): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  const t = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isFinite(t)) throw new HttpProblem(400, `${name} must be a time (ISO 8601 or epoch milliseconds)`, { errors: [`${name}: must be a time`] });
  return t;
}

/** The usage query as asked: whose, and which hours. Pure. */
export function usageQuery(query: URLSearchParams, p: Principal, now: number): { userId?: string; from: number; to: number } {
  const to = timeParam(query, "to", now);
  const from = timeParam(query, "from", to - 24 * HOUR_MS);
  if (from >= to) throw new HttpProblem(400, "from must be before to", { errors: ["from: must be before to"] });
  if (to - from > USAGE_MAX_SPAN_MS) throw new HttpProblem(400, "from and to may be at most 366 days apart");
  const asked = query.get("userId") ?? undefined;
  const operator = p.userId === DEFAULT_USER && isAdmin(p);
  if (asked !== undefined && asked !== p.userId && !operator) throw new HttpProblem(403, "Only the operator's admin key may read another user's usage");
  // The operator asking without userId reads everyone's; every other caller its own.
  const userId = asked ?? (operator ? undefined : p.userId);
  // Whole hours: an hour that overlaps the span is in it.
  return { userId, from: Math.floor(from / HOUR_MS) * HOUR_MS, to };
}

/** `GET /v1/usage`'s answer: the span asked (whole hours) and its rows, with their totals. */
function usageAnswer(q: { from: number; to: number }, rows: UsageRow[]): UsageAnswer {
  const totals = { workerSeconds: 0, gpuSeconds: 0, jobs: 0, requests: 0, gpuSecondsByType: {} as Record<string, number> };
  for (const r of rows) {
    totals.workerSeconds += r.workerSeconds;
    totals.gpuSeconds += r.gpuSeconds;
    totals.jobs += r.jobs;
    totals.requests += r.requests;
    if (r.gpuType !== "" && r.gpuSeconds > 0) totals.gpuSecondsByType[r.gpuType] = (totals.gpuSecondsByType[r.gpuType] ?? 0) + r.gpuSeconds;
  }
  return {
    from: new Date(q.from).toISOString(),
    to: new Date(q.to).toISOString(),
    hours: rows.map((r) => ({
      hour: new Date(r.hour).toISOString(),
      userId: r.userId,
      endpointId: r.endpointId,
      gpuType: r.gpuType === "" ? null : r.gpuType,
      workerSeconds: r.workerSeconds,
      gpuSeconds: r.gpuSeconds,
      jobs: r.jobs,
      requests: r.requests,
    })),
    totals,
  };
}

/** Keys that may read their user's usage: one scoped to a single endpoint's jobs may not read the whole user's. */
const USAGE_SCOPES = ["admin", "deploy", "metrics", "management:read", "management:write", "jobs:*"];

async function usage(call: RouteCall<MetricsDeps>): Promise<void> {
  if (call.principal.worker || !call.principal.scopes.some((s) => USAGE_SCOPES.includes(s))) {
    throw new HttpProblem(403, "This API key may not read usage (it needs admin, deploy, metrics, management:read, management:write or jobs:*)");
  }
  const q = usageQuery(call.url.searchParams, call.principal, Date.now());
  const meter = call.ctx.metrics?.usage;
  if (!meter) return sendJson(call.res, usageAnswer(q, []));
  // Running workers' time up to now first: a read right after a run sees all of it.
  await meter.flush();
  sendJson(call.res, usageAnswer(q, await meter.read(q)));
}

const READ = { auth: "user", body: "none", methods: ["GET"] } as const;

export const METRICS_ROUTES: ReadonlyArray<Route<MetricsDeps>> = [
  // Scraped every few seconds: not counted against rate limits. Each replica answers its own.
  { ...READ, rateLimited: false, pattern: "/metrics", purpose: "read metrics", handler: prometheusText },
  { ...READ, rateLimited: true, pattern: "/v1/endpoints/:endpoint/metrics", purpose: "read an endpoint's metrics", handler: endpointSeries },
  { ...READ, rateLimited: true, pattern: "/v1/metrics", purpose: "read the metrics of every endpoint", handler: allSeries },
  { ...READ, rateLimited: true, pattern: "/v1/usage", purpose: "read usage", handler: usage },
];
