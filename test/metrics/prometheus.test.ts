// A real Prometheus (Debian's `prometheus`, started here on a free port with a configuration and a TSDB in a
// temporary directory; never the system service) scrapes a real `svc server` with a key of the `metrics` scope
// while jobs run; what Prometheus stored matches what the jobs did.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { call, manifest, ProtocolWorker, resource } from "../service/helpers.js";
import { startService } from "../../src/service/index.js";

const KEY = "prometheus-test-admin-key";
const PROMETHEUS = "/usr/bin/prometheus";

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/** One instant query's value of Prometheus' HTTP API (undefined: no such series yet). */
async function instant(prometheusUrl: string, query: string): Promise<number | undefined> {
  const r = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await r.json()) as { status: string; data: { result: Array<{ value: [number, string] }> } };
  if (body.status !== "success" || body.data.result.length === 0) return undefined;
  return Number(body.data.result[0]!.value[1]);
}

describe.skipIf(!existsSync(PROMETHEUS))("Prometheus scraping svc server", () => {
  let work: string;
  let svc: ServerProcess | undefined;
  let prometheus: ChildProcess | undefined;
  let prometheusLog = "";

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "svc-prometheus-"));
  });
  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((r) => prometheus!.once("exit", r));
      prometheus.kill("SIGTERM");
      await exited;
    }
    await svc?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("stores the job counters, the delay histogram's count and the queue depth the jobs made", async () => {
    const dataDir = join(work, "data");
    const artifact = join(work, "artifact.tar.gz");
    writeFileSync(artifact, "not really a tarball; the service only hashes it");
    const setup = await startService({ dataDir, apiKeys: [KEY] });
    const [endpoint] = await setup.deploy({ app: "prom", env: "prod", manifest: manifest({ p: resource({ retries: 0 }) }, "prom"), artifactPath: artifact });
    const minted = await setup.mintKey({ scopes: [`worker:${endpoint!.id}`] });
    await setup.close();
    const id = endpoint!.id;

    svc = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY }, workers: "none" });
    // Prometheus reads with a key that may only read metrics.
    const scraper = await call(`${svc.url}/v1/keys`, { key: KEY, body: { scopes: ["metrics"], name: "prometheus" } });
    expect(scraper.status).toBe(201);
    const jobsOnly = await call(`${svc.url}/v1/keys`, { key: KEY, body: { scopes: ["jobs:*"] } });
    expect((await call(`${svc.url}/metrics`, { key: jobsOnly.body.key })).status).toBe(403);
    expect((await call(`${svc.url}/metrics`, { key: null })).status).toBe(401);

    const port = await freePort();
    const config = join(work, "prometheus.yml");
    writeFileSync(
      config,
      [
        "global:",
        "  scrape_interval: 1s",
        "scrape_configs:",
        "  - job_name: svc",
        "    scrape_interval: 1s",
        "    metrics_path: /metrics",
        "    authorization:",
        "      type: Bearer",
        `      credentials: ${scraper.body.key}`,
        "    static_configs:",
        `      - targets: ["${new URL(svc.url).host}"]`,
        "",
      ].join("\n"),
    );
    prometheus = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${join(work, "tsdb")}`, `--web.listen-address=127.0.0.1:${port}`], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    prometheus.stderr!.on("data", (d) => (prometheusLog += d));
    const prometheusUrl = `http://127.0.0.1:${port}`;

    // Six jobs: three complete, one fails (not retried), two stay queued.
    for (let n = 0; n < 6; n++) expect((await call(`${svc.url}/v2/${id}/run`, { key: KEY, body: { input: { n } } })).status).toBe(200);
    const w = new ProtocolWorker(svc.url, minted.id, minted.key);
    await w.register();
    const taken = await w.take(4);
    expect(taken).toHaveLength(4);
    await w.done(taken.slice(0, 3).map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: { ok: true } })));
    await w.done([{ jobId: taken[3]!.id, lease: taken[3]!.lease, status: "FAILED", error: { message: "no", retryable: false } }]);

    const expected = {
      [`svc_jobs_total{endpoint="${id}",status="COMPLETED"}`]: 3,
      [`svc_jobs_total{endpoint="${id}",status="FAILED"}`]: 1,
      [`svc_job_queue_delay_seconds_count{endpoint="${id}"}`]: 4,
      [`svc_job_execution_seconds_count{endpoint="${id}"}`]: 4,
      [`svc_queue_depth{endpoint="${id}"}`]: 2,
      // The LB front answered the /runs itself: counted under the route's pattern, never the raw path.
      [`sum(svc_http_request_duration_seconds_count{route="/v2/:endpoint/run",method="POST",status="200"})`]: 6,
      [`up{job="svc"}`]: 1,
    };
    const seen: Record<string, number | undefined> = {};
    const deadline = Date.now() + 30_000;
    for (;;) {
      for (const q of Object.keys(expected)) seen[q] = await instant(prometheusUrl, q).catch(() => undefined);
      if (Object.keys(expected).every((q) => seen[q] === expected[q]) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(seen, prometheusLog.slice(-2000)).toEqual(expected);
    // No series is labelled with a raw path: every route label is a pattern.
    const routes = await fetch(`${prometheusUrl}/api/v1/label/route/values`).then((r) => r.json() as Promise<{ data: string[] }>);
    expect(routes.data.length).toBeGreaterThan(0);
    expect(routes.data.filter((r) => r.includes(id))).toEqual([]);
  }, 90_000);
});
