// Load-balanced endpoints: requests/s and p50 latency through the service's proxy ({service}/lb/{id}/...,
// authenticated, balanced, streamed) beside the same requests sent straight to the worker's own port, in the
// same run, against the same real worker process. Target: the proxy costs at most 1.5x direct.
import { mkdtempSync, rmSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request, percentile, pool } from "./http.mjs";

export const title = "load-balanced proxy: latency and throughput vs. the worker's port";

const root = fileURLToPath(new URL("..", import.meta.url));
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);
const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);

const TARGET = 1.5;

export async function run() {
  const work = mkdtempSync(join(tmpdir(), "svc-bench-lb-"));
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "lb-app"), project, { recursive: true });
  const build = await buildProject(project, {});
  // One worker, always up, no slow start: the bench measures the proxy, not scaling.
  Object.assign(build.manifest.resources.api, { workersMin: 1, workersMax: 1, maxConcurrency: 1000, env: { LB_APP_INIT_MS: "0" } });
  const key = "bench-key";
  // In this process, as in the job API bench: the client shares the service's thread, which costs the proxied
  // path (client and proxy on one thread) and not the direct one.
  const service = await startService({ dataDir: join(work, "data"), driver: createProcessDriver({ cacheDir: join(work, "cache") }), apiKeys: [key] });
  const auth = { authorization: `Bearer ${key}` };
  try {
    const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const proxied = `${service.url}/lb/${endpoint.id}`;
    const first = await request(`${proxied}/items/warm`, { headers: auth });
    if (first.status !== 200) throw new Error(`proxy warm-up failed: ${first.status} ${first.body}`);
    // The worker's own address, from the service's log of its registration.
    const logs = JSON.parse((await request(`${service.url}/v1/endpoints/${endpoint.id}/logs`, { headers: auth })).body).lines;
    const direct = logs.map((l) => /registered at (http:\/\/[^\s;]+)/.exec(l.text)?.[1]).find(Boolean);
    if (!direct) throw new Error("the worker's address is not in the logs");

    const get = async (url, headers) => {
      const res = await request(url, { headers });
      if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.body}`);
    };
    // Warm up both paths (JIT, connections) well before measuring.
    for (let i = 0; i < 3000; i++) {
      await get(`${direct}/items/${i}?q=w`, {});
      await get(`${proxied}/items/${i}?q=w`, auth);
    }

    // Latency: one request at a time, alternating so both see the same machine state.
    const N = 1000;
    const directMs = [];
    const proxyMs = [];
    for (let i = 0; i < N; i++) {
      let t = performance.now();
      await get(`${direct}/items/${i}?q=x`, {});
      directMs.push(performance.now() - t);
      t = performance.now();
      await get(`${proxied}/items/${i}?q=x`, auth);
      proxyMs.push(performance.now() - t);
    }
    const p50Direct = percentile(directMs, 50);
    const p50Proxy = percentile(proxyMs, 50);

    // Throughput: 16 concurrent clients.
    const TOTAL = 6000;
    const CLIENTS = 16;
    const directTotalMs = await pool(TOTAL, CLIENTS, (i) => get(`${direct}/items/${i}`, {}));
    const proxyTotalMs = await pool(TOTAL, CLIENTS, (i) => get(`${proxied}/items/${i}`, auth));
    const directRps = (TOTAL / directTotalMs) * 1000;
    const proxyRps = (TOTAL / proxyTotalMs) * 1000;

    return [
      {
        name: "p50 latency via proxy",
        value: p50Proxy,
        unit: "ms",
        baselineName: "worker port directly",
        baseline: p50Direct,
        ratio: p50Proxy / p50Direct,
        target: `<= ${TARGET}x`,
        met: p50Proxy / p50Direct <= TARGET,
      },
      {
        name: "requests/s via proxy (16 clients)",
        value: proxyRps,
        unit: "req/s",
        baselineName: "worker port directly",
        baseline: directRps,
        // Time per request, as for latency: how many times the direct cost the proxy costs.
        ratio: directRps / proxyRps,
        target: `<= ${TARGET}x`,
        met: directRps / proxyRps <= TARGET,
      },
    ];
  } finally {
    await service.close();
    rmSync(work, { recursive: true, force: true });
  }
}
