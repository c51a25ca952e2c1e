// A load generator in its own process, as real clients are: it does not share the service's event loop, so a
// figure says what the service costs, not what the client and the service cost together on one thread.
//
//   node bench/load-client.mjs '<json plan>'   ->   one JSON line on stdout
//
// plan: { targets: [{ name, url, method?, headers?, body?, latencyOnly?, discard? }], warmup, latencyN, total, concurrency, concurrentWarmup? }
// In `url`, "{i}" becomes the request's number; a `body` is sent as JSON with every "{i}" string replaced by it.
// `discard`: the answer's body is read and dropped, not decoded (large answers: the client's cost stays small);
// `expectBytes`: then its length must be that.
// Every target is warmed up, then measured with the same client: p50 latency one request at a time, alternating
// between targets in a turning order (so all see the same machine state and the same predecessors), then requests/s with `concurrency` loops, one target after
// the other (`startedAt`/`endedAt`: epoch ms of that phase). Each request must answer 200.
// `concurrentWarmup`: before the requests/s phase, that many requests to every target at `concurrency`: the
// client's own code for concurrent requests is then compiled, and its connections open, before any target is
// measured. Without it the first target measured paid for both (up to a third fewer requests/s on 2 cores).
import { request, percentile, pool } from "./http.mjs";

const plan = JSON.parse(process.argv[2]);
const send = async (target, i) => {
  const url = target.url.replaceAll("{i}", String(i));
  const body = target.body === undefined ? undefined : JSON.stringify(target.body).replaceAll('"{i}"', String(i));
  const res = await request(url, { method: target.method ?? "GET", headers: target.headers ?? {}, body, discard: target.discard });
  if (res.status !== 200) throw new Error(`${target.method ?? "GET"} ${url}: ${res.status} ${String(res.body).slice(0, 200)}`);
  if (target.expectBytes !== undefined && res.body !== target.expectBytes) throw new Error(`${url}: ${res.body} bytes, not ${target.expectBytes}`);
};

for (let i = 0; i < (plan.warmup ?? 0); i++) for (const t of plan.targets) await send(t, i);

const latency = Object.fromEntries(plan.targets.map((t) => [t.name, []]));
// The order turns each round: a request measured right after another target's is slower than one measured after
// its own (on 2 cores, 0.05-0.1 ms of 0.3: the processes the previous request woke still hold the CPUs), so a
// fixed order would charge that to whichever target always came second.
const n = plan.targets.length;
for (let i = 0; i < (plan.latencyN ?? 0); i++) {
  for (let k = 0; k < n; k++) {
    const t = plan.targets[(i + k) % n];
    const started = performance.now();
    await send(t, i);
    latency[t.name].push(performance.now() - started);
  }
}
for (const t of plan.targets) if (!t.latencyOnly && plan.concurrentWarmup) await pool(plan.concurrentWarmup, plan.concurrency, (i) => send(t, i));
const result = {};
for (const t of plan.targets) {
  if (t.latencyOnly) {
    result[t.name] = { p50: percentile(latency[t.name], 50), rps: null };
    continue;
  }
  const startedAt = Date.now();
  const ms = await pool(plan.total, plan.concurrency, (i) => send(t, i));
  result[t.name] = { p50: latency[t.name].length ? percentile(latency[t.name], 50) : null, rps: (plan.total / ms) * 1000, startedAt, endedAt: Date.now() };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
