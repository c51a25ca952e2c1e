// The service's Prometheus metrics (prom-client), kept in a registry of their own: what happened is observed from
// the parts' hooks (a job ended, a worker cold-started, a batch committed, a webhook was tried, a request was
// answered), and what is — queue depth, workers by state, the GPUs — is read from its owner at scrape time, so no
// part keeps counts by hand for it. Labels are bounded: endpoint ids, route patterns (never raw paths), statuses,
// GPU indexes; never a job id. docs/observability.md lists every metric.

import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { FastHistogram, type HistogramSeries } from "./fast-histogram.js";

/** What the gauges read when Prometheus scrapes. */
export interface MetricSources {
  /** The endpoints served (their ids label every per-endpoint metric). */
  endpointIds(): Iterable<string>;
  queueDepth(endpointId: string): number;
  /** Workers by state: initializing, idle, running (draining counted again as its own state). */
  workers(endpointId: string): Record<string, number>;
  /** This host's GPUs as last sampled (none when the service hands out no GPUs). */
  gpus(): ReadonlyArray<{ index: number; uuid: string; name: string; utilizationPercent: number | null; memoryUsedMiB: number | null; memoryTotalMiB: number }>;
  /** Whether a network volume's size binds what workers write to it (volume quotas on: volumes/storage.ts). */
  volumeQuotasEnforced?(): boolean;
}

/** Seconds, from a few milliseconds (a warm job) to ten minutes (a long queue or a slow model load). */
const JOB_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const COLD_START_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
const HTTP_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export type JobFinalStatus = "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";

/** An endpoint's series, looked up once: what a job's end adds to (the job API's hot path). */
interface EndpointChildren {
  delay: HistogramSeries;
  execution: HistogramSeries;
  /** Jobs by final status, counted here and read into svc_jobs_total at scrape time. */
  jobs: Record<JobFinalStatus, number>;
}

export class PrometheusMetrics {
  readonly registry = new Registry();
  private readonly queueDelay: FastHistogram<"endpoint">;
  private readonly execution: FastHistogram<"endpoint">;
  private readonly coldStart: Histogram<"endpoint">;
  private readonly retries: Counter<"endpoint">;
  private readonly workerDeaths: Counter<"endpoint" | "reason">;
  private readonly quotaRefusals: Counter<"endpoint" | "limit">;
  private readonly webhooks: Counter<"outcome">;
  private readonly webhookRefusals: Counter<"rule" | "stage">;
  private readonly logsDroppedTotal: Counter<"reason">;
  private readonly logsRemovedTotal: Counter<"reason">;
  private readonly http: FastHistogram<"method" | "route" | "status">;
  private readonly lb: FastHistogram<"endpoint" | "code">;
  /** Per LB endpoint, its series by status class ("2xx", ...), at their index (status / 100). */
  private readonly lbByEndpoint = new Map<string, Array<HistogramSeries | undefined>>();
  private readonly commit: HistogramSeries;
  private readonly byEndpoint = new Map<string, EndpointChildren>();
  /**
   * The HTTP series by route, method and status, looked up without building a key: the route patterns and methods
   * are the same string objects on every request (their hashes are kept), statuses are small integers.
   */
  private readonly byRequest = new Map<string, Map<string, Map<number, HistogramSeries>>>();

  constructor(sources: MetricSources, store: "sqlite" | "postgres" = "sqlite") {
    const registers = [this.registry];
    const byEndpoint = this.byEndpoint;
    this.queueDelay = new FastHistogram(
      "svc_job_queue_delay_seconds",
      "Time a finished job waited from submission until a worker took it (the job API's delayTime), observed when it ends",
      ["endpoint"],
      JOB_BUCKETS,
      this.registry,
    );
    this.execution = new FastHistogram(
      "svc_job_execution_seconds",
      "Time a finished job ran, from its take to its final state (the job API's executionTime)",
      ["endpoint"],
      JOB_BUCKETS,
      this.registry,
    );
    this.coldStart = new Histogram({
      name: "svc_worker_cold_start_seconds",
      help: "From the first job waiting on an endpoint with no worker to a started worker taking it",
      labelNames: ["endpoint"],
      buckets: COLD_START_BUCKETS,
      registers,
    });
    new Counter({
      name: "svc_jobs_total",
      help: "Jobs that reached a final state, by that state",
      labelNames: ["endpoint", "status"],
      registers,
      collect() {
        this.reset();
        for (const [endpoint, e] of byEndpoint) {
          for (const [status, n] of Object.entries(e.jobs)) if (n > 0) this.inc({ endpoint, status }, n);
        }
      },
    });
    this.retries = new Counter({
      name: "svc_job_retries_total",
      help: "Failed attempts queued again for an automatic retry",
      labelNames: ["endpoint"],
      registers,
    });
    this.workerDeaths = new Counter({
      name: "svc_worker_deaths_total",
      help: "Workers that ended unasked, by reason: sigkill (out of memory, or killed from outside), signal, exit_error, exit_zero, start_failed",
      labelNames: ["endpoint", "reason"],
      registers,
    });
    this.quotaRefusals = new Counter({
      name: "svc_queue_quota_refusals_total",
      help: "Submissions refused with 429 because a queue quota (queued jobs or input bytes, per user or endpoint) was used up",
      labelNames: ["endpoint", "limit"],
      registers,
    });
    this.webhooks = new Counter({
      name: "svc_webhook_deliveries_total",
      help: "Webhook delivery attempts, by outcome (delivered, retrying, failed: given up)",
      labelNames: ["outcome"],
      registers,
    });
    this.webhookRefusals = new Counter({
      name: "svc_webhook_refusals_total",
      help: "Webhook URLs the address rules refused, by rule (loopback, private, service, ...) and stage (submit: a 422; delivery: a failed delivery)",
      labelNames: ["rule", "stage"],
      registers,
    });
    // By reason only: a bounded label (log-quota.ts's DropReason, and storage), never the endpoint or worker.
    this.logsDroppedTotal = new Counter({
      name: "svc_log_lines_dropped_total",
      help: "Worker log lines not kept, by reason: over a quota (worker_lines, worker_bytes, endpoint_lines, endpoint_bytes) or refused by the store (storage)",
      labelNames: ["reason"],
      registers,
    });
    this.logsRemovedTotal = new Counter({
      name: "svc_log_lines_removed_total",
      help: "Log lines the retention sweep removed, by reason: past the retention age (age) or beyond the endpoint's size (size)",
      labelNames: ["reason"],
      registers,
    });
    this.http = new FastHistogram(
      "svc_http_request_duration_seconds",
      "Time to answer an API request, by method, route pattern and status",
      ["method", "route", "status"],
      HTTP_BUCKETS,
      this.registry,
    );
    this.lb = new FastHistogram(
      "svc_lb_request_duration_seconds",
      "Time a load-balanced endpoint's request took from its arrival to its answer's end, by status class (2xx, 4xx, 5xx: the worker's, or the service's when no worker answered in time)",
      ["endpoint", "code"],
      HTTP_BUCKETS,
      this.registry,
    );
    // Observed on every group commit (thousands a second under load): svc's histogram, its one series kept.
    this.commit = new FastHistogram(
      "svc_store_commit_seconds",
      "Time one group commit (one transaction of the engine's batched writes) took in the store",
      ["store"],
      COMMIT_BUCKETS,
      this.registry,
    ).series({ store });

    new Gauge({
      name: "svc_queue_depth",
      help: "Jobs waiting in an endpoint's queue",
      labelNames: ["endpoint"],
      registers,
      collect() {
        this.reset();
        for (const id of sources.endpointIds()) this.set({ endpoint: id }, sources.queueDepth(id));
      },
    });
    new Gauge({
      name: "svc_volume_quotas_enforced",
      help: "1 when a network volume's size binds what workers write to it (SVC_VOLUME_QUOTAS=loop), 0 when it binds S3 writes only",
      registers,
      collect() {
        this.set(sources.volumeQuotasEnforced?.() ? 1 : 0);
      },
    });
    new Gauge({
      name: "svc_workers",
      help: "Workers of an endpoint by state (initializing, idle, running; draining ones are also counted as draining)",
      labelNames: ["endpoint", "state"],
      registers,
      collect() {
        this.reset();
        for (const id of sources.endpointIds()) {
          for (const [state, n] of Object.entries(sources.workers(id))) this.set({ endpoint: id, state }, n);
        }
      },
    });
    new Gauge({
      name: "svc_gpu_utilization_ratio",
      help: "A host GPU's utilization as last sampled (0 to 1)",
      labelNames: ["gpu", "uuid", "name"],
      registers,
      collect() {
        this.reset();
        for (const g of sources.gpus())
          if (g.utilizationPercent !== null) this.set({ gpu: String(g.index), uuid: g.uuid, name: g.name }, g.utilizationPercent / 100);
      },
    });
    new Gauge({
      name: "svc_gpu_memory_used_bytes",
      help: "A host GPU's memory in use as last sampled",
      labelNames: ["gpu", "uuid", "name"],
      registers,
      collect() {
        this.reset();
        for (const g of sources.gpus())
          if (g.memoryUsedMiB !== null) this.set({ gpu: String(g.index), uuid: g.uuid, name: g.name }, g.memoryUsedMiB * 1024 * 1024);
      },
    });
    new Gauge({
      name: "svc_gpu_memory_total_bytes",
      help: "A host GPU's memory",
      labelNames: ["gpu", "uuid", "name"],
      registers,
      collect() {
        this.reset();
        for (const g of sources.gpus()) this.set({ gpu: String(g.index), uuid: g.uuid, name: g.name }, g.memoryTotalMiB * 1024 * 1024);
      },
    });
  }

  /** A job reached its final state (committed): its status, and its delay and execution when it ran. */
  jobFinal(endpointId: string, status: JobFinalStatus, delaySeconds: number | null, executionSeconds: number | null): void {
    let e = this.byEndpoint.get(endpointId);
    if (!e) {
      e = {
        delay: this.queueDelay.series({ endpoint: endpointId }),
        execution: this.execution.series({ endpoint: endpointId }),
        jobs: { COMPLETED: 0, FAILED: 0, CANCELLED: 0, TIMED_OUT: 0 },
      };
      this.byEndpoint.set(endpointId, e);
    }
    e.jobs[status]++;
    if (executionSeconds !== null) e.execution.observe(executionSeconds);
    if (delaySeconds !== null) e.delay.observe(delaySeconds);
  }

  retry(endpointId: string): void {
    this.retries.inc({ endpoint: endpointId });
  }

  quotaRefused(endpointId: string, limit: string): void {
    this.quotaRefusals.inc({ endpoint: endpointId, limit });
  }

  coldStarted(endpointId: string, seconds: number): void {
    this.coldStart.observe({ endpoint: endpointId }, seconds);
  }

  workerDied(endpointId: string, reason: string): void {
    this.workerDeaths.inc({ endpoint: endpointId, reason });
  }

  webhookAttempt(outcome: "delivered" | "retrying" | "failed"): void {
    this.webhooks.inc({ outcome });
  }

  webhookRefused(rule: string, stage: "submit" | "delivery"): void {
    this.webhookRefusals.inc({ rule, stage });
  }

  logsDropped(reason: string, count: number): void {
    this.logsDroppedTotal.inc({ reason }, count);
  }

  logsRemoved(reason: string, count: number): void {
    this.logsRemovedTotal.inc({ reason }, count);
  }

  request(method: string, route: string, status: number, seconds: number): void {
    // Bounded: methods, the route table's patterns and statuses.
    let byMethod = this.byRequest.get(route);
    if (!byMethod) this.byRequest.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let child = byStatus.get(status);
    if (!child) byStatus.set(status, (child = this.http.series({ method, route, status: String(status) })));
    child.observe(seconds);
  }

  /** A load-balanced endpoint's request was answered (`status`: what the caller got). */
  lbAnswered(endpointId: string, status: number, seconds: number): void {
    let byClass = this.lbByEndpoint.get(endpointId);
    if (!byClass) this.lbByEndpoint.set(endpointId, (byClass = []));
    const cls = Math.min(5, Math.max(1, Math.floor(status / 100)));
    let series = byClass[cls];
    if (!series) byClass[cls] = series = this.lb.series({ endpoint: endpointId, code: `${cls}xx` });
    series.observe(seconds);
  }

  committed(seconds: number): void {
    this.commit.observe(seconds);
  }

  /** An endpoint is gone: its series go too (label values stay bounded by the endpoints that exist). */
  forget(endpointId: string): void {
    this.byEndpoint.delete(endpointId);
    this.queueDelay.remove({ endpoint: endpointId });
    this.execution.remove({ endpoint: endpointId });
    this.lb.remove({ endpoint: endpointId });
    this.lbByEndpoint.delete(endpointId);
    for (const m of [this.coldStart, this.retries]) m.remove({ endpoint: endpointId });
    for (const limit of ["user_jobs", "user_bytes", "endpoint_jobs", "endpoint_bytes"]) this.quotaRefusals.remove({ endpoint: endpointId, limit });
    for (const reason of ["sigkill", "signal", "exit_error", "exit_zero", "start_failed"]) this.workerDeaths.remove({ endpoint: endpointId, reason });
  }

  /** The text exposition format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
