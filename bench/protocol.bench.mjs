// Workers speaking the provider's protocol (docs/provider-workers.md) against workers speaking svc's own, on one
// service in a process of its own (protocol-service-child.mjs): /runsync p50 one job at a time, jobs/s with 32
// clients, and the service's own CPU time a job. Both workers are the thinnest each protocol allows
// (protocol-worker-child.mjs), with the same trivial handler and 16 jobs in flight, so what differs is what the
// service does for each protocol: a take per batch and a `done` per batch for its own, a take per batch and a
// job-done a job (form-typed JSON, the key bare) for the provider's. Rounds alternate the two, medians reported.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { median, percentile, pool, request } from "./http.mjs";

export const title = "worker protocols: the provider's against svc's own";

const here = (file) => fileURLToPath(new URL(file, import.meta.url));
const ROUNDS = 3;
const LATENCY_JOBS = 200;
const THROUGHPUT_JOBS = 2000;
const CLIENTS = 32;
const CONCURRENCY = 16;
const headers = { authorization: "Bearer bench-key" };

function startServiceChild() {
  const child = spawn(process.execPath, [here("./protocol-service-child.mjs")], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  lines.on("line", (line) => waiting.shift()?.(JSON.parse(line)));
  const next = () => new Promise((resolve) => waiting.push(resolve));
  const exited = new Promise((_, reject) => child.once("exit", (code) => reject(new Error(`the service child exited (${code})`))));
  return {
    started: Promise.race([next(), exited]),
    cpuMs: async () => {
      const answer = next();
      child.stdin.write("cpu\n");
      return (await Promise.race([answer, exited])).cpuMs;
    },
    stop: () => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once("exit", resolve), child.stdin.end()))),
  };
}

function startWorker(protocol, api, endpoint) {
  const settings = { protocol, api, endpointId: endpoint.id, workerId: endpoint.workerId, token: endpoint.token, concurrency: CONCURRENCY };
  const child = spawn(process.execPath, [here("./protocol-worker-child.mjs"), JSON.stringify(settings)], { stdio: ["ignore", "inherit", "inherit"] });
  return () => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once("exit", resolve), child.kill("SIGKILL"))));
}

async function runsync(url, i) {
  const r = await request(`${url}/runsync`, { method: "POST", headers, body: { input: { i } } });
  if (r.status !== 200 || !r.body.includes('"COMPLETED"')) throw new Error(`/runsync answered ${r.status}: ${r.body.slice(0, 200)}`);
}

/** One round of one protocol: its worker started, warmed, measured, stopped. */
async function round(service, protocol, api, endpoint) {
  const stopWorker = startWorker(protocol, api, endpoint);
  try {
    for (let i = 0; i < 50; i++) await runsync(endpoint.url, i);
    const latencies = [];
    for (let i = 0; i < LATENCY_JOBS; i++) {
      const t = performance.now();
      await runsync(endpoint.url, i);
      latencies.push(performance.now() - t);
    }
    const cpuBefore = await service.cpuMs();
    const ms = await pool(THROUGHPUT_JOBS, CLIENTS, (i) => runsync(endpoint.url, i));
    const cpu = (await service.cpuMs()) - cpuBefore;
    return { p50: percentile(latencies, 50), rate: THROUGHPUT_JOBS / (ms / 1000), cpuPerJob: cpu / THROUGHPUT_JOBS };
  } finally {
    await stopWorker();
  }
}

export async function run() {
  const service = startServiceChild();
  try {
    const { url, own, provider } = await service.started;
    const results = { own: [], provider: [] };
    for (let r = 0; r < ROUNDS; r++) {
      // Alternating which goes first, so that neither always meets a warmer service.
      const order = r % 2 === 0 ? ["own", "provider"] : ["provider", "own"];
      for (const protocol of order) results[protocol].push(await round(service, protocol, url, protocol === "own" ? own : provider));
    }
    const m = (protocol, key) => median(results[protocol].map((x) => x[key]));
    const ratios = (key) => {
      const each = results.provider.map((x, i) => x[key] / results.own[i][key]);
      return { ratio: median(each), spread: [Math.min(...each), Math.max(...each)] };
    };
    const note = `${ROUNDS} rounds each, alternating; ${CONCURRENCY} jobs in flight a worker; medians, ratio the median of the rounds' ratios`;
    const cpu = ratios("cpuPerJob");
    return [
      {
        name: "/runsync p50, provider protocol",
        value: m("provider", "p50"),
        unit: "ms",
        baselineName: "the same, svc's own protocol",
        baseline: m("own", "p50"),
        ...ratios("p50"),
        target: "",
        note,
      },
      {
        name: `jobs/s end to end (${CLIENTS} clients), provider protocol`,
        value: m("provider", "rate"),
        unit: "jobs/s",
        baselineName: "the same, svc's own protocol",
        baseline: m("own", "rate"),
        ...ratios("rate"),
        target: "",
        note,
      },
      {
        name: "the service's CPU a job, provider protocol",
        value: m("provider", "cpuPerJob"),
        unit: "ms",
        baselineName: "the same, svc's own protocol",
        baseline: m("own", "cpuPerJob"),
        ...cpu,
        target: "<= 1.3x",
        met: cpu.ratio <= 1.3,
        note,
      },
    ];
  } finally {
    await service.stop();
  }
}
