// Idempotent submits across replicas on one PostgreSQL database: the same Idempotency-Key sent 50 times at once,
// half through the replica serving jobs and half through a follower (which hands `/run` jobs off itself), makes
// one job.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type Service } from "../../src/service/index.js";
import { openPostgresStore } from "../../src/service/store/postgres/index.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import { call, manifest, resource } from "../service/helpers.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`idempotency replica tests skipped: ${unavailable}`);

describe.skipIf(unavailable !== undefined)("Idempotency-Key across replicas", () => {
  const key = "svc_test_idempotency_admin_key_0123456789";
  let server: TestPostgres;
  let work: string;
  let url: string;
  let a: Service;
  let b: Service;
  beforeAll(async () => {
    server = await startPostgres();
    work = mkdtempSync(join(tmpdir(), "svc-idem-replicas-"));
    writeFileSync(join(work, "artifact.tar.gz"), "not really a tarball; the service only hashes it");
    url = await server.createDatabase();
    a = await startService({ dataDir: join(work, "a"), storeUrl: url, apiKeys: [key] });
    b = await startService({ dataDir: join(work, "b"), storeUrl: url, apiKeys: [key] });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("makes one job for 50 concurrent repeats spread over two replicas", async () => {
    const [endpoint] = await a.deploy({
      app: "idem",
      env: "prod",
      manifest: manifest({ work: resource({ workersMax: 0 }) }, "idem"),
      artifactPath: join(work, "artifact.tar.gz"),
    });
    await expect.poll(async () => (await call(`${b.url}/v1/endpoints/${endpoint!.id}`, { key })).status, { timeout: 5_000 }).toBe(200);
    const send = (base: string) =>
      fetch(`${base}/v2/${endpoint!.id}/run`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "idempotency-key": "batch-2026-11-27" },
        body: JSON.stringify({ input: { batch: "2026-11-27" } }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: string } }));
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => send(i % 2 === 0 ? a.url : b.url)));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    expect(new Set(answers.map((r) => r.body.id)).size).toBe(1);
    const db = await openPostgresStore(url, PG_MIGRATIONS);
    try {
      const { rows } = await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE endpoint_id = $1", [endpoint!.id]);
      expect(Number(rows[0]!.n)).toBe(1);
    } finally {
      await db.close();
    }
  }, 60_000);
});
