// Build artifacts on PostgreSQL: one replica receives an upload, another (its own data directory, nothing of the
// first's disk) starts workers from it and serves it to workers; the bytes fetched are checked against the name.

import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStore, type PostgresStore } from "../../src/service/store/postgres/index.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import { postgresArtifacts } from "../../src/service/artifacts/store.js";
import { startService } from "../../src/service/index.js";
import { createProcessDriver } from "../../src/drivers/process.js";
import { JobsClient } from "svc/internal";
import { buildTestArtifact, FIXTURE_ENDPOINTS, RUNTIME_ENTRY } from "../runtime/artifact.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`artifact sharing tests skipped: ${unavailable}`);

describe.skipIf(unavailable !== undefined)("artifacts shared through PostgreSQL", () => {
  let server: TestPostgres;
  let work: string;
  beforeAll(async () => {
    server = await startPostgres();
    work = mkdtempSync(join(tmpdir(), "svc-artifacts-"));
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("a replica fetches, by its sha256, an artifact another replica published, and refuses altered bytes", async () => {
    const store: PostgresStore = await openPostgresStore(await server.createDatabase(), PG_MIGRATIONS);
    try {
      const bytes = randomBytes(2_500_000);
      const sha = createHash("sha256").update(bytes).digest("hex");
      const published = join(work, "a", "artifacts", `${sha}.tar.gz`);
      rmSync(join(work, "a"), { recursive: true, force: true });
      const a = postgresArtifacts({ dataDir: join(work, "a"), db: store.db, transaction: store.transaction });
      mkdirSync(join(work, "a", "artifacts"), { recursive: true });
      writeFileSync(published, bytes);
      await a.publish(published);
      await a.publish(published); // twice: nothing changes

      const b = postgresArtifacts({ dataDir: join(work, "b"), db: store.db, transaction: store.transaction });
      const [first, second] = await Promise.all([
        b.local(published.replace(join(work, "a"), join(work, "elsewhere"))),
        b.local(published.replace(join(work, "a"), join(work, "elsewhere"))),
      ]);
      expect(first).toBe(join(work, "b", "artifacts", `${sha}.tar.gz`));
      expect(second).toBe(first);
      expect(readFileSync(first).equals(bytes)).toBe(true);
      // Present here already: the recorded path itself.
      expect(await a.local(published)).toBe(published);

      // Bytes altered in the database are refused, and nothing is left behind.
      await store.db.query("UPDATE svc_artifact_parts SET data = $1 WHERE sha256 = $2 AND part = 1", [Buffer.alloc(1024 * 1024, 7), sha]);
      const c = postgresArtifacts({ dataDir: join(work, "c"), db: store.db, transaction: store.transaction });
      await expect(c.local(published.replace(join(work, "a"), join(work, "elsewhere")))).rejects.toThrow(/sha256/);
      expect(existsSync(join(work, "c", "artifacts", `${sha}.tar.gz`))).toBe(false);
      const unknown = "f".repeat(64);
      await expect(c.local(join(work, "x", `${unknown}.tar.gz`))).rejects.toThrow(/neither on this machine nor in the database/);
    } finally {
      await store.close();
    }
  });

  it("a job runs on a replica that never saw the upload", async () => {
    const url = await server.createDatabase();
    const key = "svc_test_artifacts_key_0123456789";
    const artifact = await buildTestArtifact(
      join(work, "artifact.tar.gz"),
      {},
      undefined,
      FIXTURE_ENDPOINTS.filter((e) => e.name === "single"),
    );
    // The first replica receives the deploy, then goes away with its data directory.
    const first = await startService({ dataDir: join(work, "first"), storeUrl: url, apiKeys: [key] });
    const [single] = await first.deploy({ app: "shared", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
    await first.close();
    rmSync(join(work, "first"), { recursive: true, force: true });

    const second = await startService({
      dataDir: join(work, "second"),
      storeUrl: url,
      apiKeys: [key],
      driver: createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache") }),
    });
    try {
      const result = await new JobsClient(`${second.url}/v2/${single!.id}`, key).runsync({ hello: "there" }, { wait: 60_000 });
      expect(result.status).toBe("COMPLETED");
      expect(JSON.stringify(result.output)).toContain("there");
      expect(existsSync(join(work, "second", "artifacts"))).toBe(true);
    } finally {
      await second.close();
    }
  }, 120_000);
});
