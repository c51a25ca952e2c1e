// The job history: a job whose result expired (the job API's /status answers 404, as the interface says) keeps its
// record (status, times, attempts, error, worker) for the operator's history retention: listed by
// GET /v2/{id}/jobs (filtered by status and time), read by GET /v2/{id}/jobs/{job}, then swept.

import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { REPO } from "../lb/harness.js";
import { call, manifest, ProtocolWorker, resource, startTestService, storedCount, until, type TestService } from "./helpers.js";
import type { DeployedEndpoint } from "../../src/service/index.js";

/** How long a record is kept after its result expired, here (7 days by default). */
const HISTORY_MS = 8000;

let t: TestService;
let endpoint: DeployedEndpoint;
let worker: ProtocolWorker;

beforeAll(async () => {
  t = await startTestService({ retentionSweepMs: 100, jobHistoryMs: HISTORY_MS });
  [endpoint] = await t.service.deploy({ app: "hist", env: "test", artifactPath: t.artifact, manifest: manifest({ h: resource({ retries: 0 }) }) });
  worker = await ProtocolWorker.mint(t, endpoint.id);
  await worker.register();
});
afterAll(async () => {
  await t?.close();
});

const jobs = async (query = "") => (await call(`${endpoint.url}/jobs${query}`, { key: t.key })).body.jobs as Array<Record<string, unknown>>;

it("keeps a failed job's record after its result expired, lists and reads it, then sweeps it after the history retention", async () => {
  const before = Date.now();
  const { body } = await call(`${endpoint.url}/run`, { key: t.key, body: { input: { n: 1 } } });
  const [job] = await worker.take(1);
  await worker.done([{ jobId: job!.id, lease: job!.lease, status: "FAILED", error: { message: "boom" } }]);
  // Its result kept 300 ms from now (the /status ttl query), then swept.
  expect((await call(`${endpoint.url}/status/${body.id}?ttl=300`, { key: t.key })).body.status).toBe("FAILED");
  await until(async () => (await call(`${endpoint.url}/status/${body.id}`, { key: t.key })).status === 404, 5000, 50);
  await until(async () => (await storedCount(t, "SELECT COUNT(*) AS n FROM jobs WHERE id = ?", [body.id])) === 0, 5000, 50);

  // Its record: in the list, with its error, marked as history.
  const listed = (await jobs()).find((j) => j.id === body.id);
  expect(listed).toMatchObject({ id: body.id, status: "FAILED", error: "boom", attempts: 1, workerId: worker.workerId, resultExpired: true });
  expect(listed!.input).toBeUndefined();
  expect(listed!.keptUntil as number).toBeGreaterThan(Date.now());
  // Filtered by status and by time, as the console's list of failures asks.
  expect((await jobs(`?status=FAILED,TIMED_OUT&since=${before}`)).map((j) => j.id)).toEqual([body.id]);
  expect((await jobs("?status=COMPLETED")).map((j) => j.id)).toEqual([]);
  expect((await jobs(`?since=${Date.now() + 60_000}`)).map((j) => j.id)).toEqual([]);
  const bad = await call(`${endpoint.url}/jobs?status=DONE`, { key: t.key });
  expect(bad.status).toBe(400);
  expect(bad.body.errors).toEqual(["status: DONE is not a job status"]);

  // Read on its own.
  const record = await call(`${endpoint.url}/jobs/${body.id}`, { key: t.key });
  expect(record.status).toBe(200);
  expect(record.body).toMatchObject({ id: body.id, status: "FAILED", error: "boom", resultExpired: true });

  // The CLI: `svc jobs status` falls back to the record, `svc jobs list` marks it.
  // (Spawned without blocking: the service answering it runs in this process.)
  const svc = (args: string[]) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
    for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
    return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [join(REPO, "bin", "svc.js"), ...args],
        { env: { ...env, SVC_API_URL: t.service.url, SVC_API_KEY: t.key }, encoding: "utf8" },
        (err, stdout, stderr) => resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  };
  const status = await svc(["jobs", "status", endpoint.id, body.id]);
  expect(status.status, status.stderr).toBe(0);
  expect(status.stdout).toMatch(
    new RegExp(
      `^${body.id} FAILED \\(waited \\d+ ms, ran \\d+ ms; 1 attempt\\(s\\), worker ${worker.workerId}\\)\nerror: boom\nits result expired (just now|.+ ago) \\(input, output and stream are no longer kept\\); this record is kept until \\d{4}-`,
    ),
  );
  expect((await svc(["jobs", "list", endpoint.id])).stdout).toContain("FAILED (result expired)");
  expect((await svc(["jobs", "status", endpoint.id, "nope"])).status).not.toBe(0);

  // A live job reads the same way, without the history mark.
  const live = await call(`${endpoint.url}/run`, { key: t.key, body: { input: { n: 2 } } });
  const liveRecord = await call(`${endpoint.url}/jobs/${live.body.id}`, { key: t.key });
  expect(liveRecord.body).toMatchObject({ id: live.body.id, status: "IN_QUEUE" });
  expect(liveRecord.body.resultExpired).toBeUndefined();
  expect((await jobs()).map((j) => j.id)).toEqual([live.body.id, body.id]);

  // Another user's key: not found, as the job API says of another's endpoint.
  const bob = await t.service.mintKey({ scopes: ["admin"], userId: "bob" });
  expect((await call(`${endpoint.url}/jobs/${body.id}`, { key: bob.key })).status).toBe(404);

  // Past the history retention: gone from the list and the record.
  await until(async () => (await call(`${endpoint.url}/jobs/${body.id}`, { key: t.key })).status === 404, HISTORY_MS + 5000, 100);
  const gone = await call(`${endpoint.url}/jobs/${body.id}`, { key: t.key });
  expect(gone.headers.get("content-type")).toBe("application/problem+json");
  expect((await jobs()).map((j) => j.id)).toEqual([live.body.id]);
}, 30_000);
