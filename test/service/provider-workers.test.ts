// Workers speaking the provider's worker protocol (docs/provider-workers.md), run as child processes: a worker
// written with Python's standard library that does what the provider's SDK does (fixtures/provider-worker),
// given the variables the drivers give such workers (drivers/provider-env.ts), against the real service.

import { execFileSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "./helpers.js";
import { startProviderWorker, type ProviderWorkerProcess } from "./provider-worker-process.js";
import { providerWorkerEnv } from "../../src/drivers/provider-env.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

const LEASE_MS = 2500;
const PING_MS = 1000;

const hasBoto3 = (() => {
  try {
    execFileSync("python3", ["-c", "import boto3"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

let t: TestService;
let endpoints = 0;
const children: ChildProcess[] = [];

beforeAll(async () => {
  t = await startTestService({ leaseMs: LEASE_MS, heartbeatMs: PING_MS });
});
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});
afterAll(async () => {
  await t?.close();
});

/** An endpoint of its own per test, so that one test's workers never take another's jobs. */
async function newEndpoint(settings: { executionTimeoutMs?: number } = {}): Promise<DeployedEndpoint> {
  const [endpoint] = await t.service.deploy({
    app: `provider${++endpoints}`,
    env: "test",
    artifactPath: t.artifact,
    manifest: manifest({ work: resource({ retries: 0, maxConcurrency: 3, ...settings }) }),
  });
  return endpoint!;
}

/** A provider worker as a driver starts one: a token of its own, the provider's variables, the process. */
async function startWorker(
  endpoint: DeployedEndpoint,
  settings: { concurrency?: number; ping?: boolean; startDelayS?: number; env?: Record<string, string> } = {},
): Promise<ProviderWorkerProcess> {
  const worker = await startProviderWorker(t, endpoint.id, {
    concurrency: settings.concurrency,
    pingMs: PING_MS,
    env: { PROVIDER_WORKER_PING: settings.ping === false ? "0" : "1", PROVIDER_WORKER_START_DELAY: String(settings.startDelayS ?? 0), ...settings.env },
  });
  children.push(worker.child);
  return worker;
}

async function status(endpoint: DeployedEndpoint, id: string) {
  return (await call(`${endpoint.url}/status/${id}`, { key: t.key })).body;
}

async function run(endpoint: DeployedEndpoint, input: unknown): Promise<string> {
  const r = await call(`${endpoint.url}/run`, { key: t.key, body: { input } });
  expect(r.status).toBe(200);
  return r.body.id as string;
}

async function final(endpoint: DeployedEndpoint, id: string, timeoutMs = 20_000) {
  return until(async () => {
    const record = await status(endpoint, id);
    return ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(record.status) ? record : undefined;
  }, timeoutMs);
}

it("runs a job to completion: /runsync answers the handler's output", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint);
  const r = await call(`${endpoint.url}/runsync`, { key: t.key, body: { input: { mode: "echo", value: "hello" } } });
  expect(r.body).toMatchObject({ status: "COMPLETED", output: { value: "hello", worker: worker.id } });
  // /run and /status too, for a handler's plain value.
  const id = await run(endpoint, 42);
  expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: { value: 42 } });
});

it.skipIf(!hasBoto3)("the upload mode hands a file over with boto3 as the SDK's helper does: it lands on the volume, its link downloads it", async () => {
  const endpoint = await newEndpoint();
  const volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "provider-uploads", size: 10, dataCenter: "local" } })).body;
  const key = (await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: { volumeIds: [volume.id] } })).body;
  await startWorker(endpoint, {
    env: { BUCKET_ENDPOINT_URL: `${key.endpoint}/${volume.id}`, BUCKET_ACCESS_KEY_ID: key.accessKeyId, BUCKET_SECRET_ACCESS_KEY: key.secretAccessKey },
  });
  const r = await call(`${endpoint.url}/runsync`, { key: t.key, body: { input: { mode: "upload", how: "image", bytes: 5000 } } });
  expect(r.body.status).toBe("COMPLETED");
  const { url, bucket, key: path, sha256 } = r.body.output;
  expect(path).toMatch(new RegExp(`^${r.body.id}/[0-9a-f]{8}\\.png$`));
  expect(existsSync(join(t.dir, "data", "volumes", volume.id, bucket, path))).toBe(true);
  const got = await fetch(url);
  expect(got.status).toBe(200);
  expect(
    createHash("sha256")
      .update(new Uint8Array(await got.arrayBuffer()))
      .digest("hex"),
  ).toBe(sha256);
});

it.skipIf(!hasBoto3)(
  "a job's s3Config reaches the handler in its job, with a key of the worker's own on the volume it named: the upload lands there",
  async () => {
    const endpoint = await newEndpoint();
    const volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "provider-s3config", size: 10, dataCenter: "local" } })).body;
    await startWorker(endpoint);
    const s3Config = { accessId: "CALLER", accessSecret: "caller-secret", bucketName: volume.id, endpointUrl: "https://elsewhere.example" };
    const r = await call(`${endpoint.url}/runsync`, { key: t.key, body: { input: { mode: "upload", how: "s3config", bytes: 3000 }, s3Config } });
    expect(r.body.status).toBe("COMPLETED");
    const { url, bucket, key: path } = r.body.output;
    expect([bucket, path]).toEqual([volume.id, `${r.body.id}/result.png`]);
    expect(existsSync(join(t.dir, "data", "volumes", volume.id, r.body.id, "result.png"))).toBe(true);
    expect((await fetch(url)).status).toBe(200);
  },
);

it("a handler's exception fails the job; /status shows the SDK's error report as the provider does", async () => {
  const endpoint = await newEndpoint();
  await startWorker(endpoint);
  const id = await run(endpoint, { mode: "error", message: "bad prompt" });
  const record = await final(endpoint, id);
  expect(record.status).toBe("FAILED");
  expect(typeof record.error).toBe("string");
  const report = JSON.parse(record.error);
  expect(report).toMatchObject({ error_type: "<class 'ValueError'>", error_message: "bad prompt" });
  expect(report.error_traceback).toContain("ValueError: bad prompt");
  expect(record.errorType).toBe("<class 'ValueError'>");
  expect(record.errorStack).toContain("Traceback");
  // A handler's dict with `error`: the job fails with the rest of its output kept.
  const kept = await final(endpoint, await run(endpoint, { mode: "error_dict", message: "half done", value: 7 }));
  expect(kept).toMatchObject({ status: "FAILED", error: "half done", output: { value: 7 } });
});

it("a generator's values reach /stream in order; isStream=true ends the job with the aggregate", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint);
  const chunks = ["a", { n: 2 }, "c", "d"];
  const id = await run(endpoint, { mode: "stream", chunks, aggregate: true, pause: 0.1 });
  const seen: unknown[] = [];
  await until(async () => {
    const r = await call(`${endpoint.url}/stream/${id}`, { key: t.key });
    seen.push(...(r.body.stream as Array<{ output: unknown }>).map((c) => c.output));
    return ["COMPLETED", "FAILED"].includes(r.body.status) && seen.length >= chunks.length;
  }, 20_000);
  expect(seen).toEqual(chunks);
  expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: chunks });
  expect(worker.lines.filter((l) => l.startsWith(`streamed ${id}`))).toEqual(chunks.map(() => `streamed ${id} 200`));
});

it("progress_update shows on /status while the job runs, as svc's own progress does", async () => {
  const endpoint = await newEndpoint();
  await startWorker(endpoint);
  const id = await run(endpoint, { mode: "progress", steps: [{ percent: 25 }, { percent: 75 }], pause: 0.6 });
  const shown = await until(async () => {
    const record = await status(endpoint, id);
    return record.status === "IN_PROGRESS" && record.output?.percent === 75 ? record : undefined;
  });
  expect(shown.output).toEqual({ percent: 75 });
  expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: "finished" });
});

it("refresh_worker: the result counts, the replacement is recorded, and the worker is given no more jobs", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint);
  const id = await run(endpoint, { mode: "refresh", value: 1 });
  expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: { value: 1, worker: worker.id } });
  const logs = await until(async () => {
    const r = await call(`${t.service.url}/v1/endpoints/${endpoint.id}/logs?job=${id}`, { key: t.key });
    const text = JSON.stringify(r.body);
    return text.includes("refresh_worker") ? text : undefined;
  });
  expect(logs).toContain(`worker ${worker.id} asked to be replaced after job ${id}`);
  // The SDK goes on asking for jobs (its driver stops it): it is told to back off (429) and gets none.
  await worker.line("backoff 429");
  const next = await run(endpoint, { mode: "echo", value: 2 });
  await new Promise((r) => setTimeout(r, 1500));
  expect((await status(endpoint, next)).status).toBe("IN_QUEUE");
});

it("cancelling a running job reaches the worker through the stop poll; the job ends CANCELLED", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint);
  const id = await run(endpoint, { mode: "sleep", seconds: 30 });
  await worker.line(`taken ${id}`);
  const cancelled = await call(`${endpoint.url}/cancel/${id}`, { key: t.key, method: "POST" });
  expect(cancelled.body).toMatchObject({ id, status: "CANCELLED" });
  await worker.line(`stopping ${id}`, 5000);
  await worker.line(`stopped ${id}`, 5000);
  expect((await status(endpoint, id)).status).toBe("CANCELLED");
  // The worker goes on to the next job.
  const next = await run(endpoint, { mode: "echo", value: "after" });
  expect(await final(endpoint, next)).toMatchObject({ status: "COMPLETED", output: { value: "after" } });
});

it("a job past its execution timeout ends TIMED_OUT and the worker is told to stop it", async () => {
  const endpoint = await newEndpoint({ executionTimeoutMs: 1500 });
  const worker = await startWorker(endpoint);
  const id = await run(endpoint, { mode: "sleep", seconds: 30 });
  await worker.line(`taken ${id}`);
  expect(await final(endpoint, id, 10_000)).toMatchObject({ status: "TIMED_OUT", errorType: "TimeoutError" });
  await worker.line(`stopping ${id}`, 5000);
  await worker.line(`stopped ${id}`, 5000);
});

it("a stop that came before the job's task started is sent again when a ping still names the job", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint, { startDelayS: 1.5 });
  const id = await run(endpoint, { mode: "sleep", seconds: 30 });
  await worker.line(`taken ${id}`);
  await call(`${endpoint.url}/cancel/${id}`, { key: t.key, method: "POST" });
  await worker.line(`no-task ${id}`, 5000);
  await worker.line(`stopping ${id}`, 5000);
  await worker.line(`stopped ${id}`, 5000);
  expect((await status(endpoint, id)).status).toBe("CANCELLED");
});

it("a worker of concurrency 3 takes a batch and runs three jobs at once", async () => {
  const endpoint = await newEndpoint();
  const ids = [
    await run(endpoint, { mode: "sleep", seconds: 2, value: 1 }),
    await run(endpoint, { mode: "sleep", seconds: 2, value: 2 }),
    await run(endpoint, { mode: "sleep", seconds: 2, value: 3 }),
  ];
  const worker = await startWorker(endpoint, { concurrency: 3 });
  await until(async () => (await Promise.all(ids.map((id) => status(endpoint, id)))).every((r) => r.status === "IN_PROGRESS"), 10_000);
  const taken = await worker.line("taken ");
  expect(taken.slice("taken ".length).split(",").sort()).toEqual([...ids].sort());
  for (const id of ids) expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: { worker: worker.id } });
});

it("a worker killed mid-job loses its lease: the job runs again on another worker", async () => {
  const endpoint = await newEndpoint();
  const doomed = await startWorker(endpoint);
  const id = await run(endpoint, { mode: "sleep", seconds: 4, value: "again" });
  await doomed.line(`taken ${id}`);
  doomed.child.kill("SIGKILL");
  await doomed.exited;
  const survivor = await startWorker(endpoint);
  const record = await final(endpoint, id);
  expect(record).toMatchObject({ status: "COMPLETED", output: { value: "again", worker: survivor.id }, attempts: 2 });
  expect(record.retries).toBeUndefined();
});

it("a worker that stops pinging loses its job to another; its late result is refused and not recorded", async () => {
  const endpoint = await newEndpoint();
  const silent = await startWorker(endpoint, { ping: false });
  const id = await run(endpoint, { mode: "sleep", seconds: (LEASE_MS * 2.5) / 1000, value: "late" });
  await silent.line(`taken ${id}`);
  const other = await startWorker(endpoint);
  await other.line(`taken ${id}`, 15_000);
  // The silent worker's result comes after another attempt owns the job: refused (409).
  await silent.line(`posted ${id} 409`, 20_000);
  const record = await final(endpoint, id);
  expect(record).toMatchObject({ status: "COMPLETED", output: { value: "late", worker: other.id }, attempts: 2 });
});

it("pings naming a job renew its lease: a job longer than the lease runs once", async () => {
  const endpoint = await newEndpoint();
  const worker = await startWorker(endpoint);
  const id = await run(endpoint, { mode: "sleep", seconds: (LEASE_MS * 2.5) / 1000, value: "kept" });
  await worker.line(`taken ${id}`);
  await worker.line(`ping ${id} 200`, 5000);
  const record = await final(endpoint, id);
  expect(record).toMatchObject({ status: "COMPLETED", output: { value: "kept", worker: worker.id }, attempts: 1 });
  expect(worker.lines.filter((l) => l.startsWith("taken "))).toEqual([`taken ${id}`]);
});

it("a take saying job_in_progress=0 hands back the jobs the worker was given but never heard of; paths are the token's own", async () => {
  const endpoint = await newEndpoint();
  const keys = await ProtocolWorker.mint(t, endpoint.id);
  const other = await ProtocolWorker.mint(t, endpoint.id);
  const env = providerWorkerEnv({ apiUrl: t.service.url, workerId: keys.workerId, endpointId: endpoint.id, workerToken: keys.token, pingIntervalMs: PING_MS });
  const takeUrl = env.RUNPOD_WEBHOOK_GET_JOB!.replace("$ID", keys.workerId);
  const take = (flag: string, token = keys.token, url = takeUrl) =>
    fetch(`${url}&job_in_progress=${flag}`, { headers: { authorization: token }, signal: AbortSignal.timeout(5000) });
  const id = await run(endpoint, { mode: "echo", value: "lost" });
  const first = await take("0");
  expect(first.status).toBe(200);
  expect(await first.json()).toEqual({ id, input: { mode: "echo", value: "lost" } });
  // Its answer never reached the worker: its next take says it runs nothing, and gets the job again at once
  // (well before the lease would have lapsed).
  const asked = Date.now();
  const again = await take("0");
  expect(await again.json()).toMatchObject({ id });
  expect(Date.now() - asked).toBeLessThan(LEASE_MS / 2);
  expect(await status(endpoint, id)).toMatchObject({ status: "IN_PROGRESS", attempts: 2 });
  // Another worker's token on this worker's path, or a token on another endpoint's path: 403.
  expect((await take("1", other.token)).status).toBe(403);
  expect((await take("1", keys.token, takeUrl.replace(`/${endpoint.id}/`, "/otherendpoint/"))).status).toBe(403);
  // svc's own protocol routes still want the bearer form.
  const bare = await fetch(`${t.service.url}/_worker/v1/heartbeat`, {
    method: "POST",
    headers: { authorization: keys.token, "content-type": "application/json" },
    body: "{}",
  });
  expect(bare.status).toBe(401);
  const done = await fetch(`${env.RUNPOD_WEBHOOK_POST_OUTPUT!.replace("$RUNPOD_POD_ID", keys.workerId).replace("$ID", id)}&isStream=false`, {
    method: "POST",
    headers: { authorization: keys.token, "content-type": "application/x-www-form-urlencoded" },
    body: JSON.stringify({ output: "by hand" }),
  });
  expect(done.status).toBe(200);
  expect(await final(endpoint, id)).toMatchObject({ status: "COMPLETED", output: "by hand" });
});

/** One request on a connection of its own (the service's fast path reads each new connection first). */
function onNewConnection(
  url: string,
  init: { method?: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; contentType: string | undefined; json: () => any }> {
  return new Promise((resolve, reject) => {
    const headers = init.body === undefined ? init.headers : { ...init.headers, "content-length": String(Buffer.byteLength(init.body)) };
    const req = request(url, { method: init.method ?? "GET", agent: false, headers, timeout: 5000 });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, contentType: res.headers["content-type"], json: () => JSON.parse(text) }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${url}`)));
    req.on("error", reject);
    req.end(init.body);
  });
}

it("a worker's calls are answered by the service's fast path from the first, as node:http answers them", async () => {
  const endpoint = await newEndpoint();
  const keys = await ProtocolWorker.mint(t, endpoint.id);
  const env = providerWorkerEnv({ apiUrl: t.service.url, workerId: keys.workerId, endpointId: endpoint.id, workerToken: keys.token, pingIntervalMs: PING_MS });
  const bare = { authorization: keys.token };
  const takeUrl = env.RUNPOD_WEBHOOK_GET_JOB!.replace("$ID", keys.workerId);
  const take = (query = "&job_in_progress=0") => onNewConnection(`${takeUrl}${query}`, { headers: bare });
  const done = (id: string, body: string) =>
    onNewConnection(`${env.RUNPOD_WEBHOOK_POST_OUTPUT!.replace("$RUNPOD_POD_ID", keys.workerId).replace("$ID", id)}&isStream=false`, {
      method: "POST",
      headers: { ...bare, "content-type": "application/x-www-form-urlencoded" },
      body,
    });
  const served = () => t.service.lbFrontStats()!.providerCalls;
  const before = served();
  // The first take registers the worker.
  const first = await run(endpoint, { mode: "echo", value: 1 });
  expect((await take()).json()).toMatchObject({ id: first });
  const second = await run(endpoint, { mode: "echo", value: 2 });
  const taken = await take("&job_in_progress=1");
  expect(taken.status).toBe(200);
  expect(taken.json()).toEqual({ id: second, input: { mode: "echo", value: 2 } });
  const ping = await onNewConnection(`${env.RUNPOD_WEBHOOK_PING!.replace("$RUNPOD_POD_ID", keys.workerId)}&job_id=${first},${second},gone`, { headers: bare });
  expect(ping.json()).toEqual({ lost: ["gone"] });
  const posted = await done(second, JSON.stringify({ output: "two" }));
  expect(posted.status).toBe(200);
  expect(posted.json()).toEqual({});
  expect(served()).toBe(before + 4);
  expect(await final(endpoint, second)).toMatchObject({ status: "COMPLETED", output: "two" });
  // A result for a job that already ended: the same 409 problem as node:http's route gives.
  const late = await done(second, JSON.stringify({ output: "again" }));
  expect(late.status).toBe(409);
  expect(late.contentType).toContain("application/problem+json");
  expect(late.json()).toMatchObject({ status: 409, reason: expect.any(String) });
  expect(served()).toBe(before + 5);
  // What the fast path does not read (a body that is not JSON, a bad batch size) is node:http's: its own answers.
  expect((await done(first, "output=one")).status).toBe(400);
  expect((await onNewConnection(`${takeUrl.replace("/job-take/", "/job-take-batch/")}&batch_size=0`, { headers: bare })).status).toBe(400);
  expect(served()).toBe(before + 5);
  expect((await done(first, JSON.stringify({ output: "one" }))).status).toBe(200);
  expect(await final(endpoint, first)).toMatchObject({ status: "COMPLETED", output: "one" });
  // svc's own take wants the bearer form on the fast path too.
  const ownBare = await onNewConnection(`${t.service.url}/_worker/v1/take`, {
    method: "POST",
    headers: { ...bare, "content-type": "application/json" },
    body: JSON.stringify({ workerId: keys.workerId, max: 1, waitMs: 0 }),
  });
  expect(ownBare.status).toBe(401);
});
