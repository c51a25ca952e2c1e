// What the service tells of itself: Prometheus metrics (prometheus.ts), the recent per-minute series behind the
// console's charts (series.ts) and usage records (usage.ts). The composition root (service/index.ts) feeds this
// from the parts' hooks (the engine's, the scaler's, the webhook outbox's) and the dispatcher from each answered
// request; nothing else counts for it. SVC_METRICS=off turns Prometheus and the series off (usage stays: it is
// what users are billed on).

import type { JobRow } from "../store/types.js";
import { PrometheusMetrics, type JobFinalStatus, type MetricSources } from "./prometheus.js";
import { RecentSeries } from "./series.js";
import { UsageMeter } from "./usage.js";
import type { UsageStore } from "./usage-store.js";

export { PrometheusMetrics, type MetricSources } from "./prometheus.js";
export { RecentSeries, type EndpointSeries, type SeriesPoint, type SeriesTotals, type Window } from "./series.js";
export { UsageMeter } from "./usage.js";
export type { UsageRow, UsageStore } from "./usage-store.js";

/** How often queue depth and workers by state are sampled into the recent series. */
const SAMPLE_MS = 5_000;

/** The routes whose requests count as an endpoint's requests in the charts: job submissions. */
const SUBMIT_ROUTES = new Set([
  "/v2/:endpoint/run",
  "/v2/:endpoint/runsync",
  "/v2/:endpoint/openai/v1/chat/completions",
  "/v2/:endpoint/openai/v1/completions",
  "/v2/:endpoint/openai/v1/embeddings",
  "/v2/:endpoint/openai/v1/responses",
]);

export interface ServiceMetricsOptions {
  /** Prometheus and the recent series (false: SVC_METRICS=off). */
  enabled: boolean;
  storeKind: "sqlite" | "postgres";
  sources: MetricSources;
  usage: UsageStore;
  /** Whose endpoint this is (usage is per user). */
  ownerOf(endpointId: string): string | undefined;
  log(message: string): void;
  usageFlushMs?: number;
  /** How often queue depth and workers are sampled into the recent series (default 5 s). */
  sampleMs?: number;
}

export class ServiceMetrics {
  readonly prometheus?: PrometheusMetrics;
  readonly recent?: RecentSeries;
  readonly usage: UsageMeter;
  private sampler?: NodeJS.Timeout;

  constructor(private readonly options: ServiceMetricsOptions) {
    if (options.enabled) {
      this.prometheus = new PrometheusMetrics(options.sources, options.storeKind);
      this.recent = new RecentSeries();
    }
    this.usage = new UsageMeter(options.usage, { log: options.log, flushMs: options.usageFlushMs });
  }

  start(): void {
    this.usage.start();
    if (!this.recent) return;
    const sample = () => {
      const { sources } = this.options;
      for (const id of sources.endpointIds()) this.recent!.sample(id, sources.queueDepth(id), sources.workers(id));
    };
    sample();
    this.sampler = setInterval(sample, this.options.sampleMs ?? SAMPLE_MS);
    this.sampler.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.sampler);
    await this.usage.close();
  }

  /** A job's final state is committed. */
  jobFinal(row: JobRow): void {
    const delayMs = row.startedAt === null ? null : Math.max(0, row.startedAt - row.createdAt);
    const executionMs = row.startedAt === null || row.completedAt === null ? null : Math.max(0, row.completedAt - row.startedAt);
    this.prometheus?.jobFinal(
      row.endpointId,
      row.status as JobFinalStatus,
      delayMs === null ? null : delayMs / 1000,
      executionMs === null ? null : executionMs / 1000,
    );
    const at = row.completedAt ?? Date.now();
    this.recent?.jobFinal(row.endpointId, row.status as JobFinalStatus, delayMs, executionMs, at);
    const owner = this.options.ownerOf(row.endpointId);
    if (owner !== undefined) this.usage.job(row.endpointId, owner, at);
  }

  retry(row: JobRow): void {
    this.prometheus?.retry(row.endpointId);
  }

  /** A submission was refused: a queue quota (engine/quotas.ts) was used up. */
  quotaRefused(endpointId: string, limit: string): void {
    this.prometheus?.quotaRefused(endpointId, limit);
  }

  coldStarted(endpointId: string, ms: number): void {
    this.prometheus?.coldStarted(endpointId, ms / 1000);
    this.recent?.coldStarted(endpointId);
  }

  /** A worker ended unasked, or could not be started (crash-loop.ts's reasons). */
  workerDied(endpointId: string, reason: string): void {
    this.prometheus?.workerDied(endpointId, reason);
  }

  committed(seconds: number): void {
    this.prometheus?.committed(seconds);
  }

  webhookAttempt(outcome: "delivered" | "retrying" | "failed"): void {
    this.prometheus?.webhookAttempt(outcome);
  }

  /** A webhook URL the address rules refused (webhooks/address-policy.ts): at submit, or at its delivery. */
  webhookRefused(rule: string, stage: "submit" | "delivery"): void {
    this.prometheus?.webhookRefused(rule, stage);
  }

  /** Worker log lines dropped: over a quota (its reason), or refused by the store ("storage"). */
  logsDropped(reason: string, count: number): void {
    this.prometheus?.logsDropped(reason, count);
  }

  /** Log lines the retention sweep removed ("age" or "size"). */
  logsRemoved(reason: string, count: number): void {
    this.prometheus?.logsRemoved(reason, count);
  }

  /** An API request was answered: `route` is its route table pattern, never the raw path. */
  request(method: string, route: string, status: number, startedAt: number, endpointId?: string): void {
    if (!this.prometheus) return;
    this.prometheus.request(method, route, status, (performance.now() - startedAt) / 1000);
    if (endpointId !== undefined && SUBMIT_ROUTES.has(route)) this.recent?.request(endpointId);
  }

  /** A load-balanced endpoint's request was answered: counted as its request, with its status and time. */
  lbAnswered(endpointId: string, status: number, ms: number): void {
    this.prometheus?.lbAnswered(endpointId, status, ms / 1000);
    this.recent?.lbAnswered(endpointId, status, ms);
    const owner = this.options.ownerOf(endpointId);
    if (owner !== undefined) this.usage.request(endpointId, owner);
  }

  workerStarted(workerId: string, endpointId: string, gpus: { typeId: string | null; count: number }, owner?: string): void {
    const userId = owner ?? this.options.ownerOf(endpointId);
    if (userId === undefined) return;
    this.usage.started({ workerId, endpointId, userId, gpuType: gpus.typeId, gpus: gpus.count });
  }

  workerStopped(workerId: string): void {
    void this.usage.stopped(workerId);
  }

  /** The endpoint was removed: its series go (label values stay bounded by the endpoints that exist). */
  forget(endpointId: string): void {
    this.prometheus?.forget(endpointId);
    this.recent?.forget(endpointId);
  }
}
