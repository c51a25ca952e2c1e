// The schema's migrations are the databases' history: an existing SQLite file or PostgreSQL database has run the
// first N of them, and opens unchanged only if they stay the same statements, in the same order, numbered the
// same. Pinned here by their count and a sha256 of the ordered texts, for every schema version a release shipped:
// appending a migration adds a pin (the earlier ones still hold for the list's first N); a change to any earlier
// entry is what this test exists to refuse.
//
// Then a database made by running the statements as the stores do (what an svc of this schema left behind) opens
// with the service's storage, every row kept, no migration left to run.

import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/service/store/driver.js";
import { SQLITE_MIGRATIONS } from "../../src/service/schema/sqlite.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import { openServiceStorage, type ServiceStorage } from "../../src/service/stores.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const sha256 = (migrations: readonly string[]) => createHash("sha256").update(JSON.stringify(migrations)).digest("hex");

const SQLITE_PINS = [
  { count: 14, sha256: "6c7c5345a3c05dc857890d143485e4c9d54be3c66d4e832d3dc9edaeb6fe6539" },
  // The index of the notices of dropped log lines.
  { count: 15, sha256: "851b433f21bb1b27e491a7501bfa1cb5b2fa61a0ed3a2dc33bacaef47db46db6" },
  // A template's /dev/shm size.
  { count: 16, sha256: "2fd105fa59959242d59ad1984f0dc325c5ceb8446c8f341a9c66e43f813d0aa8" },
  // Users' container registry credentials, and the one a template's image is pulled with.
  { count: 17, sha256: "d0c09e624cfaa0e3bbd81b64477d94bd931a445b0e36d5283b92fb9262b581de" },
  // The network volume a job's s3Config named.
  { count: 18, sha256: "bf63a23d0fb901a7b4bedde1cb676ec1f62d286e5af437f657e192df43cabd47" },
  // A load-balanced endpoint's requests in its usage.
  { count: 19, sha256: "a56f6c9ae56202c6e82042d4f4f2e62d15029d37e77292d679276658d78db1d6" },
  // The job history.
  { count: 20, sha256: "8862cff953677e78c423979fb1f612fffd81054053c152027c2d6d07a3276535" },
];
const PG_PINS = [
  { count: 13, sha256: "d27437516bb632b050bca8824c9b8832a831375d43827d4d5d840310c355295c" },
  { count: 14, sha256: "aa0a5c4a4e7bd53b248a902da2febdbd691b2827dafb88201da92a0eef617a2b" },
  { count: 15, sha256: "b9f8a2ca0c8fcda4c7b6161eee6544eab4922c6a07b87004ddabd4a4cc8e68c9" },
  // Users' container registry credentials, and the one a template's image is pulled with.
  { count: 16, sha256: "1553e5e8b21ca5b8590bd25ff4d6f3a4805a89fb8051e8d5fe0c22c0b941403a" },
  // The network volume a job's s3Config named.
  { count: 17, sha256: "ca669cdb089d42b068bd3b2412fa11e22ecb2304e51469a91c6c54b2de4efd09" },
  // A load-balanced endpoint's requests in its usage.
  { count: 18, sha256: "730de089382bc335ea5e69da9816c982d8d7d6e406ead279432e27de35bc30f4" },
  // The job history.
  { count: 19, sha256: "947d16ac608b46441b976a16535bde019ac9d21e6766698fcb1d91777761e3a2" },
];
const SQLITE_PIN = SQLITE_PINS.at(-1)!;
const PG_PIN = PG_PINS.at(-1)!;

const work = mkdtempSync(join(tmpdir(), "svc-migrations-"));
const opened: ServiceStorage[] = [];
let server: TestPostgres | undefined;
afterAll(async () => {
  for (const s of opened) await s.close();
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

/** Rows an older svc wrote: one job, one API key, one network volume. */
const JOB = `INSERT INTO jobs (id, endpoint_id, status, input, sync, low_priority, created_at, attempt, retried, ttl_ms)
  VALUES ('job-kept', 'e1', 'IN_QUEUE', '{"a":1}', false, false, 1, 0, 0, 60000)`;
const KEY = `INSERT INTO api_keys (id, hash, user_id, scopes, created_at) VALUES ('key-kept', 'h', 'u1', '["admin"]', 1)`;
const VOLUME = `INSERT INTO network_volumes (id, user_id, name, size, data_center, type, created_at)
  VALUES ('vol000000000001', 'u1', 'kept', 10, 'dc1', 'STANDARD', 1)`;

async function expectRowsKept(storage: ServiceStorage) {
  expect(await storage.store.getJob("job-kept")).toMatchObject({ id: "job-kept", status: "IN_QUEUE", input: '{"a":1}' });
  expect(await storage.management.key("key-kept")).toMatchObject({ id: "key-kept", userId: "u1", scopes: ["admin"] });
  expect(storage.management.volumes("u1")).toEqual([expect.objectContaining({ id: "vol000000000001", name: "kept", type: "STANDARD" })]);
}

describe("the migrations", () => {
  it("are the same statements, in the same order, for SQLite", () => {
    expect(SQLITE_MIGRATIONS.length).toBe(SQLITE_PIN.count);
    for (const pin of SQLITE_PINS) expect({ count: pin.count, sha256: sha256(SQLITE_MIGRATIONS.slice(0, pin.count)) }).toEqual(pin);
  });

  it("are the same statements, in the same order, for PostgreSQL", () => {
    expect(PG_MIGRATIONS.length).toBe(PG_PIN.count);
    for (const pin of PG_PINS) expect({ count: pin.count, sha256: sha256(PG_MIGRATIONS.slice(0, pin.count)) }).toEqual(pin);
  });

  it("open a SQLite file an svc of this schema wrote, keeping its rows and its schema version", async () => {
    const dataDir = join(work, "sqlite");
    const file = join(dataDir, "svc.sqlite");
    mkdirSync(dataDir, { recursive: true });
    const db = openDatabase(file);
    // What the SQLite store does at open: each migration and its number in one transaction.
    SQLITE_MIGRATIONS.forEach((m, version) =>
      db.transaction(() => {
        db.exec(m);
        db.pragma(`user_version = ${version + 1}`);
      })(),
    );
    for (const row of [JOB, KEY, VOLUME]) db.exec(row.replace(/\bfalse\b/g, "0"));
    db.close();

    const storage = await openServiceStorage({ dataDir });
    opened.push(storage);
    await expectRowsKept(storage);
    const check = openDatabase(file, { readonly: true });
    expect(check.pragma("user_version", { simple: true })).toBe(SQLITE_PIN.count);
    check.close();
  });

  const noPostgres = postgresUnavailable();
  if (noPostgres) console.warn(`migrations on postgres skipped: ${noPostgres}`);
  it.skipIf(noPostgres !== undefined)("open a PostgreSQL database an svc of this schema wrote, keeping its rows and its schema version", async () => {
    server = await startPostgres();
    const url = await server.createDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    // What the PostgreSQL store does at open: the version table, then each migration and its number.
    await client.query("CREATE TABLE svc_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())");
    for (const [version, m] of PG_MIGRATIONS.entries()) {
      await client.query(m);
      await client.query("INSERT INTO svc_schema (version) VALUES ($1)", [version + 1]);
    }
    for (const row of [JOB, KEY, VOLUME]) await client.query(row);

    const storage = await openServiceStorage({ dataDir: join(work, "postgres"), storeUrl: url });
    opened.push(storage);
    await expectRowsKept(storage);
    const { rows } = await client.query<{ version: number }>("SELECT max(version) AS version FROM svc_schema");
    expect(rows[0]!.version).toBe(PG_PIN.count);
    await client.end();
  });
});
