// Idempotent submits (an `Idempotency-Key` header on /run and /runsync): one job per key, whatever the number of
// repeats and their concurrency, and after the service is killed. Runs on SQLite and, under test:postgres, on
// PostgreSQL (SVC_TEST_STORE=postgres).

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manifest, ProtocolWorker, resource, startTestService, storedCount, type TestService } from "./helpers.js";

async function submit(
  url: string,
  key: string,
  idempotencyKey: string | undefined,
  body: unknown,
): Promise<{ status: number; body: any; replayed: string | null }> {
  const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${key}` };
  if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, replayed: response.headers.get("idempotent-replayed") };
}

describe("Idempotency-Key on the job API", () => {
  let t: TestService;
  let endpointId: string;
  let base: string;
  beforeAll(async () => {
    t = await startTestService();
    const [endpoint] = await t.service.deploy({
      app: "idem",
      env: "test",
      manifest: manifest({ work: resource({ workersMax: 0 }) }, "idem"),
      artifactPath: t.artifact,
    });
    endpointId = endpoint!.id;
    base = `${t.service.url}/v2/${endpointId}`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("makes one job for 50 concurrent /run repeats of one key, and tells the repeats they are repeats", async () => {
    const answers = await Promise.all(Array.from({ length: 50 }, () => submit(`${base}/run`, t.key, "order-1234", { input: { order: 1234 } })));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const ids = new Set(answers.map((a) => a.body.id));
    expect(ids.size).toBe(1);
    expect(answers.filter((a) => a.replayed === null)).toHaveLength(1);
    expect(answers.filter((a) => a.replayed === "true")).toHaveLength(49);
    expect(await storedCount(t, "SELECT count(*) AS n FROM jobs WHERE endpoint_id = ?", [endpointId])).toBe(1);

    // A later repeat, the same body with its keys in another order: still that job, with its status now.
    const later = await submit(`${base}/run`, t.key, "order-1234", { input: { order: 1234 } });
    expect(later).toMatchObject({ status: 200, body: { id: [...ids][0], status: "IN_QUEUE" }, replayed: "true" });
    // Without a key, or with another key, a new job.
    const plain = await submit(`${base}/run`, t.key, undefined, { input: { order: 1234 } });
    const other = await submit(`${base}/run`, t.key, "order-5678", { input: { order: 1234 } });
    expect(new Set([[...ids][0], plain.body.id, other.body.id]).size).toBe(3);
  });

  it("refuses a repeat with another body (422), and a malformed key (400), as problem+json", async () => {
    const first = await submit(`${base}/run`, t.key, "pay-1", { input: { amount: 10 } });
    expect(first.status).toBe(200);
    const changed = await submit(`${base}/run`, t.key, "pay-1", { input: { amount: 11 } });
    expect(changed.status).toBe(422);
    expect(changed.body).toMatchObject({ status: 422, title: "Unprocessable Entity" });
    expect(changed.body.detail).toContain(first.body.id);
    const tooLong = await submit(`${base}/run`, t.key, "k".repeat(256), { input: {} });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.detail).toMatch(/Idempotency-Key/);
    expect(await storedCount(t, "SELECT count(*) AS n FROM jobs WHERE input = ?", ['{"amount":11}'])).toBe(0);
  });

  it("answers a repeated /runsync with the first job's result", async () => {
    // An endpoint of its own: the other tests leave jobs queued.
    const [endpoint] = await t.service.deploy({
      app: "idem-sync",
      env: "test",
      manifest: manifest({ work: resource({ workersMax: 0 }) }, "idem-sync"),
      artifactPath: t.artifact,
    });
    const base = `${t.service.url}/v2/${endpoint!.id}`;
    const worker = await ProtocolWorker.mint(t, endpoint!.id);
    await worker.register();
    const first = submit(`${base}/runsync?wait=10000`, t.key, "sync-1", { input: { n: 7 } });
    const [taken] = await worker.take(1, 5_000);
    expect(taken!.input).toEqual({ n: 7 });
    await worker.done([{ jobId: taken!.id, lease: taken!.lease, status: "COMPLETED", output: { doubled: 14 } }]);
    expect((await first).body).toMatchObject({ id: taken!.id, status: "COMPLETED", output: { doubled: 14 } });
    const again = await submit(`${base}/runsync`, t.key, "sync-1", { input: { n: 7 } });
    expect(again).toMatchObject({ status: 200, replayed: "true", body: { id: taken!.id, status: "COMPLETED", output: { doubled: 14 } } });
    // Nothing new was queued.
    expect(await worker.take(1, 300)).toEqual([]);
  });

  it("keeps a key apart per user: another user's same key is another job", async () => {
    const { key: otherKey } = await t.service.mintKey({ scopes: ["admin"], userId: "someone-else" });
    const [endpoint] = await t.service.deploy({
      app: "idem2",
      env: "test",
      manifest: manifest({ work: resource({ workersMax: 0 }) }, "idem2"),
      artifactPath: t.artifact,
      ownerKey: otherKey,
    });
    const mine = await submit(`${base}/run`, t.key, "shared-name", { input: 1 });
    const theirs = await submit(`${t.service.url}/v2/${endpoint!.id}/run`, otherKey, "shared-name", { input: 1 });
    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    expect(theirs.body.id).not.toBe(mine.body.id);
    expect(theirs.replayed).toBeNull();
  });
});

describe("Idempotency-Key across a kill -9", () => {
  const fixture = new URL("./fixtures/child-service.mjs", import.meta.url).pathname;
  const ADMIN_KEY = "idem-crash-admin-key";
  let dir: string;
  const children = new Set<ChildProcess>();
  const exited = (child: ChildProcess) =>
    child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => child.once("exit", () => r()));

  async function startChild(): Promise<{ child: ChildProcess; endpointUrl: string }> {
    const child = spawn(process.execPath, [fixture], {
      env: { ...process.env, DATA_DIR: join(dir, "data"), ARTIFACT: join(dir, "artifact.tar.gz"), ADMIN_KEY, LEASE_MS: "500" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.add(child);
    child.once("exit", () => children.delete(child));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once("line", resolve);
      child.once("exit", (code) => reject(new Error(`child service exited early (${code})`)));
    });
    return { child, endpointUrl: (JSON.parse(line) as { endpointUrl: string }).endpointUrl };
  }

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "svc-idem-crash-"));
    writeFileSync(join(dir, "artifact.tar.gz"), "artifact");
  });
  afterAll(async () => {
    for (const child of children) {
      child.kill("SIGKILL");
      await exited(child);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(process.env.SVC_TEST_STORE === "postgres")(
    "finds the acknowledged job after the service is killed and started again",
    async () => {
      const first = await startChild();
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => submit(`${first.endpointUrl}/run`, ADMIN_KEY, "nightly-render-42", { input: { frame: 42 } })),
      );
      const ids = new Set(answers.map((a) => a.body.id));
      expect(ids.size).toBe(1);
      first.child.kill("SIGKILL");
      await exited(first.child);

      const second = await startChild();
      const again = await Promise.all(
        Array.from({ length: 20 }, () => submit(`${second.endpointUrl}/run`, ADMIN_KEY, "nightly-render-42", { input: { frame: 42 } })),
      );
      expect(new Set(again.map((a) => a.body.id))).toEqual(ids);
      expect(again.every((a) => a.status === 200 && a.replayed === "true")).toBe(true);
      second.child.kill("SIGTERM");
      await exited(second.child);
    },
    30_000,
  );
});
