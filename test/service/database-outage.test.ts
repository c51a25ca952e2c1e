// A real `svc server --store postgres://...` whose database goes away under load and comes back: /run answers 503
// with Retry-After and problem+json naming the unavailable storage (never 500), refused jobs never run,
// acknowledged jobs all complete exactly once, /health reports the storage, the log says it once each way, and
// the service resumes by itself. Then the service's connections are killed mid-transaction, repeatedly, while
// jobs are submitted: every acknowledged job still completes once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { UNSANDBOXED, startServerProcess, type ServerProcess } from "../server-process.js";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const KEY = "database-outage-admin-key";
// The test stops and starts the server: a server of its own, never one given from outside.
const unavailable = process.env.SVC_TEST_POSTGRES_URL ? "a PostgreSQL server given from outside cannot be stopped by the test" : postgresUnavailable();
if (unavailable) console.warn(`database outage tests skipped: ${unavailable}`);

let work: string;
let database: TestPostgres;
let storeUrl: string;
let svc: ServerProcess;
let endpoint: string;

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as any };
}

async function untilCompleted(ids: string[], statuses: number[], ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (const id of ids) {
    for (;;) {
      const r = await api("GET", `/v2/${endpoint}/status/${id}`);
      statuses.push(r.status);
      if (r.body?.status === "COMPLETED") break;
      if (Date.now() > deadline) throw new Error(`job ${id} still ${r.status} ${JSON.stringify(r.body)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }
}

describe.skipIf(unavailable !== undefined)("svc server on PostgreSQL when the database fails", () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "svc-db-outage-"));
    database = await startPostgres();
    storeUrl = await database.createDatabase();
    svc = await startServerProcess({ dataDir: join(work, "data"), env: { SVC_API_KEY: KEY, SVC_STORE_URL: storeUrl, ...UNSANDBOXED } });
    await deployFixture(copyFixture("restart-app", work), svc.url, KEY);
    endpoint = (await api("GET", "/v1/apps/restart-app/environments/prod")).body.endpoints[0].id as string;
  }, 120_000);

  afterAll(async () => {
    await svc?.stop();
    await database?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("refuses with 503 while the database is down, runs only what it acknowledged (once each), and resumes when it is back", async () => {
    const marks = join(work, "runs.txt");
    const statuses: number[] = [];
    const acknowledged: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api("POST", `/v2/${endpoint}/run`, { input: { n: 6, ms: 250, mark: marks, tag: `ack${i}` } });
      expect(r.status, JSON.stringify(r.body) + svc.log()).toBe(200);
      acknowledged.push(r.body.id);
    }
    // Give the first job time to start, then take the database away (as a crash would: no clean shutdown).
    await new Promise((r) => setTimeout(r, 500));
    database.kill();

    const refusedTags: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await api("POST", `/v2/${endpoint}/run`, { input: { n: 1, ms: 1, mark: marks, tag: `late${i}` } });
      statuses.push(r.status);
      if (r.status === 200) {
        acknowledged.push(r.body.id);
        continue;
      }
      refusedTags.push(`late${i}`);
      expect(r.status).toBe(503);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.headers.get("retry-after")).toBe("5");
      expect(r.body.detail).toContain("The service's storage is unavailable");
    }
    expect(refusedTags.length, svc.log()).toBeGreaterThan(0);
    const health = await api("GET", `/v2/${endpoint}/health`).catch((err) => {
      throw new Error(`${err}\n${svc.log()}`);
    });
    expect(health.status).toBe(200);
    expect(health.body.storage).toMatchObject({ ok: false, cause: "unavailable" });
    await new Promise((r) => setTimeout(r, 3000));

    database.start();
    await untilCompleted(acknowledged, statuses);
    const back = Date.now() + 10_000;
    while ((await api("GET", `/v2/${endpoint}/health`)).body.storage?.ok !== true && Date.now() < back) await new Promise((r) => setTimeout(r, 200));
    expect((await api("GET", `/v2/${endpoint}/health`)).body.storage).toMatchObject({ ok: true });

    const runs = readFileSync(marks, "utf8").trim().split("\n");
    for (let i = 0; i < 4; i++) expect(runs.filter((t) => t === `ack${i}`)).toHaveLength(1);
    for (const tag of refusedTags) expect(runs).not.toContain(tag);
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    expect(svc.log().match(/storage refuses writes: The service's storage is unavailable/g)).toHaveLength(1);
    expect(svc.log().match(/storage takes writes again/g)).toHaveLength(1);
    expect(existsSync(marks)).toBe(true);
  }, 150_000);

  it("completes every acknowledged job once while its connections are killed mid-transaction", async () => {
    const marks = join(work, "runs-killed.txt");
    const statuses: number[] = [];
    const acknowledged: Array<{ id: string; tag: string }> = [];
    const admin = new pg.Client({ connectionString: storeUrl });
    await admin.connect();
    let killing = true;
    const killer = (async () => {
      while (killing) {
        await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'svc' AND pid <> pg_backend_pid()");
        await new Promise((r) => setTimeout(r, 150));
      }
    })();
    try {
      for (let i = 0; i < 30; i++) {
        const tag = `kill${i}`;
        const r = await api("POST", `/v2/${endpoint}/run`, { input: { n: 1, ms: 1, mark: marks, tag } });
        statuses.push(r.status);
        if (r.status === 200) acknowledged.push({ id: r.body.id, tag });
        else expect(r.status).toBe(503);
        await new Promise((res) => setTimeout(res, 30));
      }
    } finally {
      killing = false;
      await killer;
      await admin.end();
    }
    expect(acknowledged.length).toBeGreaterThan(0);
    await untilCompleted(
      acknowledged.map((a) => a.id),
      statuses,
    );
    const runs = readFileSync(marks, "utf8").trim().split("\n");
    for (const { tag } of acknowledged) expect(runs.filter((t) => t === tag)).toHaveLength(1);
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
  }, 150_000);
});
