// Load-balanced endpoints: requests/s and p50 latency through the service's proxy ({service}/lb/{id}/...,
// authenticated, balanced, streamed) beside the same requests sent straight to the worker's own port, in the
// same run, against the same real worker process. Target: the proxy costs at most 1.5x direct. Also printed:
// the floor of the extra hop over TCP (a plain TCP relay), the proxy reaching its worker over TCP instead of the
// process driver's local socket (as Docker workers are reached), and the proxy without the LB front (node:http).
import { mkdtempSync, rmSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFile } from "node:child_process";
import { createServer, connect } from "node:net";
import { promisify } from "node:util";
import { request } from "./http.mjs";

const run_ = promisify(execFile);

export const title = "load-balanced proxy: latency and throughput vs. the worker's port";

const root = fileURLToPath(new URL("..", import.meta.url));
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);
const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);
const { openDatabase } = await import(`${root}dist/service/store/driver.js`);
const { LB_CREDENTIAL_HEADER, lbCredentialOfKeyHash } = await import(`${root}dist/lb-credential.js`);

const TARGET = 1.5;

export async function run() {
  const work = mkdtempSync(join(tmpdir(), "svc-bench-lb-"));
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "lb-app"), project, { recursive: true });
  const build = await buildProject(project, {});
  // One worker, always up, no slow start: the bench measures the proxy, not scaling.
  Object.assign(build.manifest.resources.api, { workersMin: 1, workersMax: 1, maxConcurrency: 1000, env: { LB_APP_INIT_MS: "0" } });
  const key = "bench-key";
  const service = await startService({ dataDir: join(work, "data"), driver: createProcessDriver({ cacheDir: join(work, "cache") }), apiKeys: [key] });
  // The same app on a second service without the LB front (SVC_LB_FRONT=off): the node:http path, for comparison.
  const plain = await startService({
    dataDir: join(work, "data-plain"),
    driver: createProcessDriver({ cacheDir: join(work, "cache-plain") }),
    apiKeys: [key],
    lbFront: false,
  });
  // And on a third, the proxy reaching its worker over TCP instead of the local socket the process driver gives
  // (how Docker workers are reached): what the socket is worth.
  const tcp = await startService({
    dataDir: join(work, "data-tcp"),
    driver: createProcessDriver({ cacheDir: join(work, "cache-tcp"), localSockets: false }),
    apiKeys: [key],
  });
  const auth = { authorization: `Bearer ${key}` };
  const relays = [];
  try {
    const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const [plainEndpoint] = await plain.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const [tcpEndpoint] = await tcp.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const proxied = `${service.url}/lb/${endpoint.id}`;
    const proxiedPlain = `${plain.url}/lb/${plainEndpoint.id}`;
    const proxiedTcp = `${tcp.url}/lb/${tcpEndpoint.id}`;
    for (const url of [proxied, proxiedPlain, proxiedTcp]) {
      const first = await request(`${url}/items/warm`, { headers: auth });
      if (first.status !== 200) throw new Error(`proxy warm-up failed: ${first.status} ${first.body}`);
    }
    // The worker's own address, from the service's log of its registration.
    const logs = JSON.parse((await request(`${service.url}/v1/endpoints/${endpoint.id}/logs`, { headers: auth })).body).lines;
    const registered = logs.map((l) => /^lb: worker (\w+) registered at (http:\/\/[^\s;]+)/.exec(l.text)).find(Boolean);
    if (!registered) throw new Error("the worker's address is not in the logs");
    const direct = registered[2];
    // The worker answers only requests with its credential (docs/lb.md): derived, as the service does, from the
    // hash of its token in the keys table. Direct requests carry it as proxied ones do.
    const db = openDatabase(join(work, "data", "svc.sqlite"), { readonly: true });
    const { hash } = db.prepare("SELECT hash FROM api_keys WHERE id = ?").get(registered[1]);
    db.close();
    const credential = { [LB_CREDENTIAL_HEADER]: lbCredentialOfKeyHash(hash) };

    // The floor any proxy pays: a plain TCP relay in the service's process (bytes piped both ways, no HTTP, no
    // key, no balancing) in front of the same worker. Only its latency is measured.
    const workerPort = Number(new URL(direct).port);
    const relay = createServer((caller) => {
      const upstream = connect(workerPort, "127.0.0.1");
      caller.setNoDelay(true);
      upstream.setNoDelay(true);
      caller.pipe(upstream).pipe(caller);
      caller.on("error", () => upstream.destroy());
      upstream.on("error", () => caller.destroy());
    });
    await new Promise((resolve) => relay.listen(0, "127.0.0.1", resolve));
    relays.push(relay);

    // The client runs in a process of its own (bench/load-client.mjs), as real clients do, and sends the
    // same requests both ways: straight to the worker's port, and through the proxy with the key.
    const plan = {
      targets: [
        { name: "direct", url: `${direct}/items/{i}`, headers: credential },
        { name: "proxy", url: `${proxied}/items/{i}`, headers: auth },
        { name: "relay", url: `http://127.0.0.1:${relay.address().port}/items/{i}`, headers: credential, latencyOnly: true },
        { name: "nodeHttp", url: `${proxiedPlain}/items/{i}`, headers: auth, latencyOnly: true },
        { name: "overTcp", url: `${proxiedTcp}/items/{i}`, headers: auth, latencyOnly: true },
      ],
      warmup: 3000,
      latencyN: 1000,
      total: 6000,
      concurrency: 16,
    };
    const { stdout } = await run_(process.execPath, [join(root, "bench", "load-client.mjs"), JSON.stringify(plan)], { maxBuffer: 1 << 20 });
    const measured = JSON.parse(stdout);
    const p50Direct = measured.direct.p50;
    const p50Proxy = measured.proxy.p50;
    const p50Relay = measured.relay.p50;
    const p50NodeHttp = measured.nodeHttp.p50;
    const p50OverTcp = measured.overTcp.p50;
    const directRps = measured.direct.rps;
    const proxyRps = measured.proxy.rps;

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
        name: "p50 latency via a plain TCP relay (the hop alone)",
        value: p50Relay,
        unit: "ms",
        baselineName: "worker port directly",
        baseline: p50Direct,
        ratio: p50Relay / p50Direct,
        target: "",
        met: undefined,
      },
      {
        // Its own worker (same code, another process) answers as fast as the first: the same baseline serves.
        name: "p50 latency via proxy, worker over TCP (as Docker workers)",
        value: p50OverTcp,
        unit: "ms",
        baselineName: "worker port directly",
        baseline: p50Direct,
        ratio: p50OverTcp / p50Direct,
        target: "",
        met: undefined,
      },
      {
        name: "p50 latency via proxy without the LB front (node:http)",
        value: p50NodeHttp,
        unit: "ms",
        baselineName: "worker port directly",
        baseline: p50Direct,
        ratio: p50NodeHttp / p50Direct,
        target: "",
        met: undefined,
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
    for (const relay of relays) relay.close();
    await service.close();
    await plain.close();
    await tcp.close();
    rmSync(work, { recursive: true, force: true });
  }
}
