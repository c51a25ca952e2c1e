// One worker of the worker-protocol bench (protocol.bench.mjs), as thin as a worker can be, so that what differs
// between the two is the protocol the service serves: the trivial handler (its output is its input) behind
//   own       svc's worker protocol as svc's runtime speaks it (runtime/api.ts): register on a connection of its
//             own, then take up to `concurrency` jobs in one long poll, the previous batch's results carried in the
//             next take (one request a batch);
//   provider  the provider's protocol as its worker SDK speaks it (docs/provider-workers.md): the bare key, a
//             `job-take-batch` GET of up to `concurrency` jobs, then one form-typed JSON `job-done` POST a job.
//
//   node bench/protocol-worker-child.mjs '<json>'   json: { protocol, api, endpointId, workerId, token, concurrency }
// Runs until killed.
import http from "node:http";
import { request } from "./http.mjs";

const o = JSON.parse(process.argv[2]);
const fail = (what, r) => {
  process.stderr.write(`protocol-worker-child (${o.protocol}): ${what} answered ${r.status}: ${String(r.body).slice(0, 200)}\n`);
  process.exit(1);
};

if (o.protocol === "own") {
  const headers = { authorization: `Bearer ${o.token}` };
  // (The runtime's other calls go on connections apart from its takes', which the service's fast path answers.)
  const others = new http.Agent({ keepAlive: true });
  const post = (route, body, agent) => request(`${o.api}/_worker/v1/${route}`, { method: "POST", headers, body, agent });
  const registered = await post("register", { workerId: o.workerId, pid: process.pid, concurrency: o.concurrency }, others);
  if (registered.status !== 200) fail("register", registered);
  let results;
  for (;;) {
    const taken = await post("take", { workerId: o.workerId, max: o.concurrency, waitMs: 1000, ...(results ? { results } : {}) });
    if (taken.status !== 200) fail("take", taken);
    const { jobs } = JSON.parse(taken.body);
    results = jobs.length === 0 ? undefined : jobs.map((job) => ({ jobId: job.id, lease: job.lease, status: "COMPLETED", output: job.input }));
  }
} else if (o.protocol === "provider") {
  const { providerWorkerEnv } = await import("../dist/drivers/provider-env.js");
  const env = providerWorkerEnv({ apiUrl: o.api, workerId: o.workerId, endpointId: o.endpointId, workerToken: o.token, pingIntervalMs: 10_000 });
  const headers = { authorization: env.RUNPOD_AI_API_KEY };
  const pod = (url) => url.replaceAll("$RUNPOD_POD_ID", o.workerId);
  const takeUrl = `${env.RUNPOD_WEBHOOK_GET_JOB.replace("$ID", o.workerId).replace("/job-take/", "/job-take-batch/")}&batch_size=${o.concurrency}&job_in_progress=0`;
  const doneUrl = pod(env.RUNPOD_WEBHOOK_POST_OUTPUT);
  const formHeaders = { ...headers, "content-type": "application/x-www-form-urlencoded" };
  for (;;) {
    const taken = await request(takeUrl, { headers });
    if (taken.status === 204 || taken.status === 400) continue;
    if (taken.status !== 200) fail("job-take-batch", taken);
    const body = JSON.parse(taken.body);
    const jobs = Array.isArray(body) ? body : [body];
    await Promise.all(
      jobs.map(async (job) => {
        const done = await request(`${doneUrl.replace("$ID", job.id)}&isStream=false`, {
          method: "POST",
          headers: formHeaders,
          body: JSON.stringify({ output: job.input }),
        });
        if (done.status !== 200) fail("job-done", done);
      }),
    );
  }
} else {
  throw new Error(`unknown protocol ${o.protocol}`);
}
