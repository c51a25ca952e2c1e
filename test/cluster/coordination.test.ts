// Coordination between replicas through PostgreSQL (a real server): the leader lease (one holder at a time, a
// quick handover when the holder stops, a holder cut off from the database steps down before anyone else can
// take over) and the change feed (wake-ups across connections, a resync after the listener's connection drops, and the
// notices the database's own triggers send for configuration and key changes).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { openPostgresStore, type PostgresStore, type Queryable } from "../../src/service/store/postgres/index.js";
import { PG_MIGRATIONS } from "../../src/service/schema/postgres.js";
import { createLeaderLease, leaseHolder, type LeaderLease } from "../../src/service/cluster/leader.js";
import { createChangeFeed, noticePayloads, parseNotice } from "../../src/service/cluster/change-feed.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";

const unavailable = postgresUnavailable();
if (unavailable) console.warn(`cluster coordination tests skipped: ${unavailable}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("change notices", () => {
  it("lists ids while they fit, else says the whole topic changed", () => {
    const small = noticePayloads(new Map([["jobs", new Set(["a", "b"])]]));
    expect(small.map(parseNotice)).toEqual([{ topic: "jobs", ids: ["a", "b"] }]);
    const many = new Set(Array.from({ length: 2_000 }, (_, i) => `job-${i}`));
    expect(noticePayloads(new Map([["jobs", many]])).map(parseNotice)).toEqual([{ topic: "jobs", ids: undefined }]);
    expect(parseNotice("not json")).toBeUndefined();
  });
});

describe.skipIf(unavailable !== undefined)("coordination on PostgreSQL", () => {
  let server: TestPostgres;
  let url: string;
  let store: PostgresStore;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
    store = await openPostgresStore(url, PG_MIGRATIONS);
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it("gives the lease to one replica at a time and hands it over at once when the holder stops", async () => {
    const events: string[] = [];
    const lease = (holder: string) =>
      createLeaderLease({ db: store.db, name: "scaler", holder, ttlMs: 900, renewMs: 150, onChange: (on) => events.push(`${holder}:${on}`) });
    const a = lease("a");
    const b = lease("b");
    await a.start();
    await b.start();
    expect([a.leading, b.leading]).toEqual([true, false]);
    // Never both, while they renew and retry.
    for (let i = 0; i < 20; i++) {
      expect(a.leading && b.leading).toBe(false);
      await sleep(25);
    }
    expect(a.leading).toBe(true);
    const stoppedAt = Date.now();
    await a.stop();
    while (!b.leading) await sleep(10);
    // At its next attempt, not a ttl later.
    expect(Date.now() - stoppedAt).toBeLessThan(600);
    expect(events).toEqual(["a:true", "a:false", "b:true"]);
    await b.stop();
  });

  it("tells followers whether the holder adopts hand-offs, by its own name: an older svc taking over leaves a name not its own", async () => {
    const seen: boolean[] = [];
    const adopter = createLeaderLease({ db: store.db, name: "jobs-adopting", holder: "new", adoptsHandoffs: true, ttlMs: 900, renewMs: 150 });
    const follower = createLeaderLease({
      db: store.db,
      name: "jobs-adopting",
      holder: "follower",
      ttlMs: 900,
      renewMs: 150,
      onHolder: (h) => h && seen.push(h.adoptsHandoffs),
    });
    await adopter.start();
    await follower.start();
    expect(await leaseHolder(store.db, "jobs-adopting")).toMatchObject({ holder: "new", adoptsHandoffs: true });
    while (seen.length === 0) await sleep(20);
    expect(seen[0]).toBe(true);
    await follower.stop();
    // The adopter dies (its lease lapses) and an older svc takes the lease with the upsert it knows.
    await adopter.stop();
    await store.db.query(
      "INSERT INTO svc_leases (name, holder, acquired_at, expires_at, address, adopting) VALUES ('jobs-adopting', 'new', 0, 0, NULL, 'new')",
    );
    await store.db.query(
      `INSERT INTO svc_leases (name, holder, acquired_at, expires_at, address) VALUES ('jobs-adopting', 'old', svc_now_ms(), svc_now_ms() + 60000, 'http://old')
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, address = excluded.address`,
    );
    expect(await leaseHolder(store.db, "jobs-adopting")).toMatchObject({ holder: "old", adoptsHandoffs: false });
  });

  it("a holder cut off from the database steps down before another replica can take over", async () => {
    let cut = false;
    const flaky: Queryable = {
      query: (text, values) => (cut ? new Promise(() => undefined /* an answer that never comes: a dead connection */) : store.db.query(text, values)) as never,
    };
    const samples: Array<[boolean, boolean]> = [];
    const a: LeaderLease = createLeaderLease({ db: flaky, name: "retention", holder: "a", ttlMs: 900, renewMs: 150 });
    const b: LeaderLease = createLeaderLease({ db: store.db, name: "retention", holder: "b", ttlMs: 900, renewMs: 150 });
    await a.start();
    await b.start();
    expect(a.leading).toBe(true);
    cut = true;
    const cutAt = Date.now();
    while (!b.leading) {
      samples.push([a.leading, b.leading]);
      await sleep(10);
      expect(Date.now() - cutAt).toBeLessThan(3_000);
    }
    samples.push([a.leading, b.leading]);
    expect(a.leading).toBe(false);
    expect(samples.some(([x, y]) => x && y)).toBe(false);
    await b.stop();
    await a.stop();
  });

  it("wakes other replicas' subscribers, coalesces a tick's changes, and resyncs after the listener's connection drops", async () => {
    const other = await openPostgresStore(url, PG_MIGRATIONS);
    const here = createChangeFeed({ url, db: store.db });
    const there = createChangeFeed({ url, db: other.db });
    try {
      await Promise.all([here.ready(), there.ready()]);
      const got: Array<string[] | undefined> = [];
      let resyncs = 0;
      there.subscribe("jobs", (ids) => got.push(ids));
      there.onResync(() => resyncs++);
      here.publish("jobs", ["j1"]);
      here.publish("jobs", ["j2", "j1"]);
      here.publish("keys", ["k1"]);
      while (got.length === 0) await sleep(10);
      await sleep(100);
      expect(got).toEqual([["j1", "j2"]]);

      // Drop the listening connection as a failover would: the feed reconnects and says to re-read.
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'svc-listen'");
      await admin.end();
      const until = Date.now() + 5_000;
      while (resyncs === 0 && Date.now() < until) await sleep(20);
      expect(resyncs).toBeGreaterThan(0);
      // Still listening: a notice after the reconnection arrives. (Both feeds' listeners were dropped; wait for ours too.)
      await sleep(300);
      here.publish("jobs", ["j3"]);
      while (got.length < 2 && Date.now() < until + 5_000) await sleep(10);
      expect(got.at(-1)).toEqual(["j3"]);
    } finally {
      await here.close();
      await there.close();
      await other.close();
    }
  });

  it("a deploy and a key's revocation are told at their commit; a batch of results bumping an endpoint's counters is not", async () => {
    const feed = createChangeFeed({ url, db: store.db });
    try {
      await feed.ready();
      const heard: string[] = [];
      feed.subscribe("config", () => heard.push("config"));
      feed.subscribe("keys", () => heard.push("keys"));
      const endpoint = {
        id: "ep1",
        userId: "u1",
        app: "shop",
        env: "prod",
        name: "api",
        type: "queue" as const,
        resource: { name: "api" } as never,
        artifactPath: "/a",
        revision: "r1",
        createdAt: 1,
        updatedAt: 1,
      };
      await store.apply([{ op: "upsertEndpoint", endpoint }]);
      const until = Date.now() + 5_000;
      while (!heard.includes("config") && Date.now() < until) await sleep(10);
      expect(heard).toEqual(["config"]);

      heard.length = 0;
      for (let i = 0; i < 5; i++) await store.apply([{ op: "addCounters", endpointId: "ep1", completed: 1, failed: 0, retried: 0 }]);
      await store.apply([{ op: "insertKey", key: { id: "k1", hash: "ab".repeat(32), userId: "u1", scopes: ["admin"], createdAt: 1, revokedAt: null } }]);
      await store.apply([{ op: "revokeKey", id: "k1", at: 2 }]);
      while (heard.length < 2 && Date.now() < until) await sleep(10);
      await sleep(100);
      expect(heard).toEqual(["keys", "keys"]);
    } finally {
      await feed.close();
    }
  });
});

describe.skipIf(unavailable !== undefined)("a rate limit shared by replicas", () => {
  let server: TestPostgres;
  let stores: PostgresStore[];
  beforeAll(async () => {
    server = await startPostgres();
    const url = await server.createDatabase();
    stores = [await openPostgresStore(url, PG_MIGRATIONS), await openPostgresStore(url, PG_MIGRATIONS)];
  });
  afterAll(async () => {
    for (const s of stores ?? []) await s.close();
    await server?.stop();
  });

  it("admits one quota in total across replicas, give or take one sync's worth", async () => {
    const { SharedRateLimiter } = await import("../../src/service/cluster/shared-rate-limiter.js");
    const windows = [{ name: "minute", seconds: 60, quota: 100 }];
    const replicas = stores.map((s) => new SharedRateLimiter(windows, { db: s.db, syncMs: 1_000_000 }));
    let admitted = 0;
    // Requests alternate between the replicas, syncing every 10 requests (as their timers would).
    for (let i = 0; i < 300; i++) {
      if (replicas[i % 2]!.hit("u1").allowed) admitted++;
      if (i % 10 === 9) await Promise.all(replicas.map((r) => r.sync()));
    }
    // One replica alone would admit 100; two each counting alone, 200.
    expect(admitted).toBeGreaterThanOrEqual(100);
    expect(admitted).toBeLessThanOrEqual(110);
    const refused = replicas[0]!.hit("u1");
    expect(refused).toMatchObject({ allowed: false, exceeded: { name: "minute" } });
    expect(refused.rateLimit).toMatch(/^"minute";r=0;t=\d+$/);
    // Another user has a quota of their own.
    expect(replicas[1]!.hit("u2").allowed).toBe(true);
    for (const r of replicas) await r.stop();
  });
});
