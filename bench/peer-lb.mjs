// svc's load-balanced proxy beside nginx and HAProxy, all three in front of the same plain Node server process
// (plain-server-child.mjs) over TCP with keep-alive upstream connections, measured by the same load client
// (load-client.mjs, a process of its own) in alternating rounds. Used by bench/peers-lb.bench.mjs (full size)
// and test/bench/peers.test.ts (one tiny round, so the harness cannot rot).
//
// svc's side is a real service in a process of its own (svc-child.mjs) with its LB front on: the caller's key is
// checked, the request is rate-limited, balanced and proxied to the endpoint's one worker, which is the plain
// server itself (outside-server-driver.mjs registers it as the worker), so the proxies differ and nothing else does.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { median, startPlainServerProcess, startSvcChild } from "./http.mjs";
import { BENCH_KEY } from "./svc-service.mjs";
import { startHaproxy, startNginx } from "./peer-servers.mjs";

const run_ = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));

export const LB_TARGET = 1.1;
const MB = 1 << 20;

/** The loads measured: small JSON one request at a time (p50) and at 64 connections, 1 MB answers at 16 and 64. */
export function lbScenarios({ smallTotal = 20000, largeTotal = 600, latencyN = 600 } = {}) {
  return [
    { key: "small-c1", label: "small JSON, p50 at 1 connection", path: "/items/{i}", latencyN, unit: "ms", warmup: 200 },
    {
      key: "small-c64",
      label: "small JSON, req/s at 64 connections",
      path: "/items/{i}",
      total: smallTotal,
      concurrency: 64,
      unit: "req/s",
      warmup: 200,
      concurrentWarmup: Math.ceil(smallTotal / 4),
    },
    {
      key: "1mb-c16",
      label: "1 MB answers, req/s at 16 connections",
      path: `/bytes/${MB}`,
      bytes: MB,
      total: largeTotal,
      concurrency: 16,
      unit: "req/s",
      warmup: 20,
      concurrentWarmup: Math.ceil(largeTotal / 6),
    },
    {
      key: "1mb-c64",
      label: "1 MB answers, req/s at 64 connections",
      path: `/bytes/${MB}`,
      bytes: MB,
      total: largeTotal,
      concurrency: 64,
      unit: "req/s",
      warmup: 20,
      concurrentWarmup: Math.ceil(largeTotal / 6),
    },
  ];
}

/**
 * Starts svc's service, in a process of its own (svc-child.mjs) as nginx and HAProxy are, with the plain server
 * as its LB endpoint's worker: `{ url, headers, close() }`.
 */
async function startSvcProxy(upstream) {
  const { url, close } = await startSvcChild("lb", upstream);
  return {
    name: "svc",
    url,
    headers: { authorization: `Bearer ${BENCH_KEY}` },
    settings: "a process of its own, LB front on, key checked, one worker (the plain server) over TCP",
    close,
  };
}

/**
 * Runs `warmupRounds` rounds not counted, then `rounds` rounds; in each, every scenario once, every proxy in it
 * (their order turning each round).
 * `peerStarters`: [name, start(upstreamUrl)] for each peer (nginx and HAProxy unless told otherwise); one whose
 * start fails gets rows saying why instead of figures.
 * Returns `{ proxies, rows }`: rows in bench/run.mjs's format, one per scenario and peer, ratios being svc's cost
 * over the peer's (time per request), medians of the per-round ratios with their spread.
 */
export async function measureLbPeers({
  rounds = 5,
  warmupRounds = 1,
  scenarios = lbScenarios(),
  peerStarters = [
    ["nginx", startNginx],
    ["HAProxy", startHaproxy],
  ],
  onProgress = () => {},
} = {}) {
  const upstream = await startPlainServerProcess();
  const peers = [];
  let svc;
  try {
    svc = await startSvcProxy(upstream.url);
    for (const [name, start] of peerStarters) {
      try {
        peers.push({ ...(await start(upstream.url)), name });
      } catch (err) {
        peers.push({ name, error: err.message });
      }
    }
    const live = [svc, ...peers.filter((p) => !p.error)];
    // figures[scenario][proxy] = one figure a round.
    const figures = Object.fromEntries(scenarios.map((s) => [s.key, Object.fromEntries(live.map((p) => [p.name, []]))]));
    // `warmupRounds` first, not counted: svc's service is a new process, whose code V8 compiles and recompiles over
    // its first several thousand requests (the first round's p50 was up to 1.4x the next ones'); nginx's and
    // HAProxy's is compiled ahead.
    for (let round = -warmupRounds; round < rounds; round++) {
      for (const s of scenarios) {
        const order = live.map((_, i) => live[(i + round + warmupRounds) % live.length]);
        const plan = {
          targets: order.map((p) => ({
            name: p.name,
            url: `${p.url}${s.path}`,
            headers: p.headers ?? {},
            latencyOnly: s.latencyN !== undefined,
            discard: s.bytes !== undefined,
            expectBytes: s.bytes,
          })),
          warmup: s.warmup,
          latencyN: s.latencyN ?? 0,
          total: s.total ?? 0,
          concurrency: s.concurrency ?? 1,
          concurrentWarmup: s.concurrentWarmup ?? 0,
        };
        const { stdout } = await run_(process.execPath, [join(root, "bench", "load-client.mjs"), JSON.stringify(plan)], { maxBuffer: 1 << 20 });
        const measured = JSON.parse(stdout);
        const figure = (p) => (s.latencyN !== undefined ? measured[p.name].p50 : measured[p.name].rps);
        const seen = live.map((p) => `${p.name} ${figure(p).toFixed(2)}`).join(", ");
        if (round < 0) {
          onProgress(`warm-up round (not counted), ${s.label}: ${seen}`);
          continue;
        }
        for (const p of live) figures[s.key][p.name].push(figure(p));
        onProgress(`round ${round + 1}/${rounds}, ${s.label}: ${seen}`);
      }
    }
    // The target is nginx's; HAProxy's rows are there for comparison.
    const targetOf = (peer) => (peer.name === "nginx" ? { target: `<= ${LB_TARGET}x` } : { target: "" });
    const rows = [];
    for (const s of scenarios) {
      const svcFigures = figures[s.key].svc;
      for (const peer of peers) {
        const name = `svc vs ${peer.name}: ${s.label}`;
        if (peer.error) {
          rows.push({
            name,
            value: median(svcFigures),
            unit: s.unit,
            baselineName: `${peer.name}: could not start`,
            baseline: "-",
            ratio: "-",
            ...targetOf(peer),
            met: peer.name === "nginx" ? false : undefined,
            note: `${peer.name} could not start: ${peer.error}`,
          });
          continue;
        }
        const peerFigures = figures[s.key][peer.name];
        // svc's cost over the peer's: latency over latency, or the peer's rate over svc's (time per request).
        const ratios = svcFigures.map((v, i) => (s.unit === "ms" ? v / peerFigures[i] : peerFigures[i] / v));
        const ratio = median(ratios);
        rows.push({
          name,
          value: median(svcFigures),
          unit: s.unit,
          baselineName: peer.name,
          baseline: median(peerFigures),
          ratio,
          spread: [Math.min(...ratios), Math.max(...ratios)],
          ...targetOf(peer),
          met: peer.name === "nginx" ? ratio <= LB_TARGET : undefined,
          note: `${peer.name}: ${peer.settings}; svc: ${svc.settings}; ${rounds} rounds after ${warmupRounds} not counted, ratio = svc's time per request over the peer's, median of the rounds'`,
        });
      }
    }
    return { proxies: [svc, ...peers].map(({ name, settings, error }) => ({ name, settings, error })), rows };
  } finally {
    for (const peer of peers) await peer.stop?.();
    await svc?.close();
    await upstream.close();
  }
}
