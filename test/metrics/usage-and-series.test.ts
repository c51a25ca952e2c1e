// Usage records and the recent series behind the charts, against a real service over a real SQLite file: usage
// after a known run equals the workers' lifetimes (as the driver saw them) within a second, survives a restart,
// and counts GPU-seconds by type on a host the fake nvidia-smi describes; an endpoint's per-minute series counts
// the run's requests, delays, executions and queue; the GPU gauges read the inventory; SVC_METRICS=off turns
// /metrics and the series off.
import { afterEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startService, type Service } from "../../src/service/index.js";
import { readInventory } from "../../src/gpus/inventory.js";
import type { WorkerDriver, WorkerExit, WorkerHandle, WorkerLaunch } from "../../src/drivers/types.js";
import { call, manifest, ProtocolWorker, resource, until, webhookReceiver } from "../service/helpers.js";

const KEY = "usage-admin-key";
const FAKE_DIR = fileURLToPath(new URL("../fakes/gpu", import.meta.url));
const GPUS = [
  { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81559, usedMiB: 1200, utilization: 37 },
  { name: "NVIDIA GeForce RTX 4090", memoryMiB: 24564 },
];
const fakeGpus = () =>
  readInventory({ env: { ...process.env, PATH: `${FAKE_DIR}${delimiter}${process.env.PATH ?? ""}`, FAKE_NVIDIA_SMI_GPUS: JSON.stringify(GPUS) } });

/** Workers that register over the worker protocol as soon as they start; their lifetimes as the driver saw them. */
class LifetimeDriver implements WorkerDriver {
  readonly name = "process" as const;
  readonly lives = new Map<string, { start: number; end?: number; worker: ProtocolWorker; gpus?: string[] }>();
  private readonly ends: Array<() => void> = [];

  async start(launch: WorkerLaunch): Promise<WorkerHandle> {
    let exit!: (e: WorkerExit) => void;
    const exited = new Promise<WorkerExit>((resolve) => (exit = resolve));
    const worker = new ProtocolWorker(launch.apiUrl, launch.workerId, launch.workerToken);
    const life: { start: number; end?: number; worker: ProtocolWorker; gpus?: string[] } = { start: Date.now(), worker, gpus: launch.gpus };
    this.lives.set(launch.workerId, life);
    const end = () => {
      life.end ??= Date.now();
      exit({ code: 0, signal: null });
    };
    this.ends.push(end);
    setImmediate(() => void worker.register().catch(() => undefined));
    return { workerId: launch.workerId, exited, stop: async () => (end(), exited), kill: end };
  }

  async close(): Promise<void> {
    for (const end of this.ends) end();
  }
}

const dirs: string[] = [];
const services: Service[] = [];
afterEach(async () => {
  for (const s of services.splice(0).reverse()) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function workDir(): { dataDir: string; artifact: string } {
  const dir = mkdtempSync(join(tmpdir(), "svc-usage-"));
  dirs.push(dir);
  const artifact = join(dir, "artifact.tar.gz");
  writeFileSync(artifact, "not really a tarball; the service only hashes it");
  return { dataDir: join(dir, "data"), artifact };
}

describe("usage", () => {
  it("equals the workers' lifetimes within a second, GPU-seconds by type included, and survives a restart", async () => {
    const { dataDir, artifact } = workDir();
    const driver = new LifetimeDriver();
    const service = await startService({
      dataDir,
      apiKeys: [KEY],
      driver,
      leaseMs: 2000,
      heartbeatMs: 300,
      usageFlushMs: 200,
      gpus: { read: fakeGpus, sampleMs: 0 },
    });
    const [endpoint] = await service.deploy({
      app: "usage",
      env: "prod",
      manifest: manifest(
        { g: resource({ workersMin: 1, workersMax: 1, computeType: "GPU", gpuTypeIds: ["ADA_80_PRO"], gpuCount: 1, instanceIds: [] }) },
        "usage",
      ),
      artifactPath: artifact,
    });
    const life = await until(() => [...driver.lives.values()].find((l) => l.end === undefined));
    expect(life.gpus).toHaveLength(1);
    // Two jobs run on it.
    for (let n = 0; n < 2; n++) expect((await call(`${endpoint!.url}/run`, { key: KEY, body: { input: { n } } })).status).toBe(200);
    const jobs = await until(async () => {
      const taken = await life.worker.take(2, 500);
      return taken.length === 2 ? taken : undefined;
    });
    await life.worker.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: {} })));
    await new Promise((r) => setTimeout(r, 1500));

    // While it runs: its time so far.
    const running = await call(`${service.url}/v1/usage`, { key: KEY });
    expect(running.status).toBe(200);
    const soFar = [...driver.lives.values()].reduce((t, l) => t + ((l.end ?? Date.now()) - l.start) / 1000, 0);
    expect(Math.abs(running.body.totals.workerSeconds - soFar), JSON.stringify(running.body)).toBeLessThan(1);

    await service.close();
    const lifetime = [...driver.lives.values()].reduce((s, l) => s + (l.end! - l.start) / 1000, 0);
    expect(lifetime).toBeGreaterThan(1.5);

    // Written durably: a new process of the service on the same data answers the same.
    const again = await startService({ dataDir, apiKeys: [KEY] });
    services.push(again);
    const usage = await call(`${again.url}/v1/usage?from=${new Date(Date.now() - 3_600_000).toISOString()}`, { key: KEY });
    expect(usage.status).toBe(200);
    expect(Math.abs(usage.body.totals.workerSeconds - lifetime)).toBeLessThan(1);
    expect(Math.abs(usage.body.totals.gpuSecondsByType.ADA_80_PRO - lifetime)).toBeLessThan(1);
    expect(usage.body.totals.jobs).toBe(2);
    expect(usage.body.hours.every((h: { userId: string; endpointId: string }) => h.userId === "default" && h.endpointId === endpoint!.id)).toBe(true);

    // Another user reads its own (none); only the operator may name another user.
    const bob = await again.mintKey({ scopes: ["admin"], userId: "bob" });
    const own = await call(`${again.url}/v1/usage`, { key: bob.key });
    expect(own.body.totals).toMatchObject({ workerSeconds: 0, jobs: 0 });
    expect((await call(`${again.url}/v1/usage?userId=default`, { key: bob.key })).status).toBe(403);
    expect((await call(`${again.url}/v1/usage?userId=default`, { key: KEY })).body.totals.jobs).toBe(2);
    expect((await call(`${again.url}/v1/usage?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z`, { key: KEY })).status).toBe(400);
    const oneEndpoint = await again.mintKey({ scopes: [`jobs:${endpoint!.id}`] });
    expect((await call(`${again.url}/v1/usage`, { key: oneEndpoint.key })).status).toBe(403);
  }, 60_000);
});

describe("an endpoint's recent series and the GPU gauges", () => {
  it("counts a known run per minute: requests, delay and execution percentiles, queue depth and workers", async () => {
    const { dataDir, artifact } = workDir();
    const service = await startService({
      dataDir,
      apiKeys: [KEY],
      leaseMs: 2000,
      heartbeatMs: 300,
      metricsSampleMs: 50,
      gpus: { read: fakeGpus, sampleMs: 0 },
      driver: new LifetimeDriver(),
    });
    services.push(service);
    const [endpoint] = await service.deploy({
      app: "charts",
      env: "prod",
      manifest: manifest({ c: resource({ workersMax: 0 }) }, "charts"),
      artifactPath: artifact,
    });
    const id = endpoint!.id;
    const series = async (window = "1h") => call(`${service.url}/v1/endpoints/${id}/metrics?window=${window}`, { key: KEY });
    const last = async () => (await series()).body.points.at(-1);

    for (let n = 0; n < 3; n++) expect((await call(`${endpoint!.url}/run`, { key: KEY, body: { input: { n } } })).status).toBe(200);
    await until(async () => (await last()).queueDepth === 3);
    const w = await ProtocolWorker.mint({ service }, id);
    await w.register();
    await new Promise((r) => setTimeout(r, 100));
    const jobs = await w.take(3);
    await new Promise((r) => setTimeout(r, 200));
    await w.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: {} })));
    await until(async () => {
      const p = await last();
      return p.queueDepth === 0 && p.executionMs.p50 !== null && p.workers?.running === 0;
    });

    const hour = await series();
    expect(hour.status).toBe(200);
    expect(hour.body).toMatchObject({ endpointId: id, window: "1h", stepSeconds: 60 });
    expect(hour.body.points).toHaveLength(60);
    const points = hour.body.points as Array<{
      requestsPerMinute: number;
      delayMs: { p50: number | null; p95: number | null };
      executionMs: { p50: number | null };
      workers: Record<string, number> | null;
    }>;
    expect(points.reduce((n, p) => n + p.requestsPerMinute, 0)).toBe(3);
    const now = points.at(-1)!;
    // Delays were at least the 100 ms before the take; executions at least the 200 ms before done (5% buckets).
    expect(points.some((p) => p.delayMs.p95 !== null && p.delayMs.p95 >= 95)).toBe(true);
    expect(points.some((p) => p.executionMs.p50 !== null && p.executionMs.p50 >= 190 && p.executionMs.p50 < 2000)).toBe(true);
    // The release's probe (now the endpoint's worker) and the test's worker.
    const health = (await call(`${endpoint!.url}/health`, { key: KEY })).body;
    expect(health.workers.idle).toBeGreaterThanOrEqual(1);
    expect(now.workers).toMatchObject({ idle: health.workers.idle, running: 0 });

    const day = await series("1d");
    expect(day.body).toMatchObject({ window: "1d", stepSeconds: 300 });
    expect(day.body.points).toHaveLength(288);
    expect((day.body.points as Array<{ requestsPerMinute: number }>).reduce((n, p) => n + p.requestsPerMinute * 5, 0)).toBe(3);
    expect((await series("1w")).status).toBe(400);
    const bob = await service.mintKey({ scopes: ["admin"], userId: "bob" });
    expect((await call(`${service.url}/v1/endpoints/${id}/metrics`, { key: bob.key })).status).toBe(404);

    // The host's GPUs, as the inventory last read them.
    const text = (await call(`${service.url}/metrics`, { key: KEY })).text;
    expect(text).toMatch(/svc_gpu_utilization_ratio\{gpu="0",uuid="[^"]+",name="NVIDIA H100 80GB HBM3"\} 0\.37/);
    expect(text).toMatch(new RegExp(`svc_gpu_memory_used_bytes\\{gpu="0",[^}]*\\} ${1200 * 1024 * 1024}`));
    expect(text).toMatch(/svc_store_commit_seconds_count\{store="sqlite"\} [1-9]/);
    expect(text).toMatch(new RegExp(`svc_workers\\{endpoint="${id}",state="idle"\\} ${health.workers.idle}`));
  }, 60_000);

  it("counts retries, webhook deliveries by outcome and HTTP statuses by route pattern", async () => {
    const { dataDir, artifact } = workDir();
    const receiver = await webhookReceiver();
    const service = await startService({ dataDir, apiKeys: [KEY], leaseMs: 2000, heartbeatMs: 300, webhooks: { intervalMs: 50, allow: ["127.0.0.1/32"] } });
    services.push(service);
    try {
      const [endpoint] = await service.deploy({
        app: "retry",
        env: "prod",
        manifest: manifest({ r: resource({ retries: 1 }) }, "retry"),
        artifactPath: artifact,
      });
      const id = endpoint!.id;
      expect((await call(`${endpoint!.url}/run`, { key: KEY, body: { input: {}, webhook: receiver.url } })).status).toBe(200);
      expect((await call(`${endpoint!.url}/status/nope`, { key: KEY })).status).toBe(404);
      const w = await ProtocolWorker.mint({ service }, id);
      await w.register();
      const [first] = await w.take(1);
      await w.done([{ jobId: first!.id, lease: first!.lease, status: "FAILED", error: { message: "once" } }]);
      const again = await until(async () => (await w.take(1, 500))[0]);
      await w.done([{ jobId: again.id, lease: again.lease, status: "COMPLETED", output: {} }]);
      await until(() => receiver.received.length === 1);
      const text = await until(async () => {
        const t = (await call(`${service.url}/metrics`, { key: KEY })).text;
        return t.includes('svc_webhook_deliveries_total{outcome="delivered"} 1') ? t : undefined;
      });
      expect(text).toContain(`svc_job_retries_total{endpoint="${id}"} 1`);
      expect(text).toContain(`svc_jobs_total{endpoint="${id}",status="COMPLETED"} 1`);
      expect(text).toMatch(/svc_http_request_duration_seconds_count\{method="GET",route="\/v2\/:endpoint\/status\/:job",status="404"\} 1/);
      expect(text).not.toContain("/status/nope");
    } finally {
      await receiver.close();
    }
  });

  it("is off with SVC_METRICS=off: /metrics and the series answer 404, usage is still kept", async () => {
    const { dataDir } = workDir();
    const service = await startService({ dataDir, apiKeys: [KEY], metrics: false });
    services.push(service);
    expect((await call(`${service.url}/metrics`, { key: KEY })).status).toBe(404);
    expect((await call(`${service.url}/v1/usage`, { key: KEY })).status).toBe(200);
  });
});
