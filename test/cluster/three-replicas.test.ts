// Three `svc server` replicas on one PostgreSQL database, behind a round-robin TCP proxy written for the tests
// (bench/tcp-proxy.mjs), their process workers pointed at the proxy (SVC_CLUSTER_URL). Jobs are submitted through
// the proxy (/run, some with a webhook, and /runsync); at 30% of a wave a replica is killed with SIGKILL: the one
// serving jobs in the first wave, a follower in the second. Every acknowledged job completes with its own output;
// only a job whose lease lapsed with its replica may run twice; every /runsync that answered 200 COMPLETED has its
// own output; every webhook is delivered; and the endpoint's worker processes never exceed its workersMax, though
// the workers of the killed replica live on (the replica that takes over adopts them).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import pg from "pg";
import { join } from "node:path";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { UNSANDBOXED, startServerProcess, type ServerProcess } from "../server-process.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";
import { roundRobin as roundRobinProxy } from "../../bench/tcp-proxy.mjs";

const roundRobin = roundRobinProxy as (ports: () => number[]) => Promise<{ server: Server; url: string }>;

const KEY = "three-replicas-admin-key";
/** The fixture's endpoint: workers [0, 2]. */
const WORKERS_MAX = 2;
const unavailable = postgresUnavailable();
if (unavailable) console.warn(`three-replica test skipped: ${unavailable}`);

/** Live processes (not zombies) whose environment names this endpoint: its workers, whoever started them. */
async function workerProcesses(endpointId: string): Promise<number> {
  let n = 0;
  for (const pid of (await readdir("/proc")).filter((d) => /^\d+$/.test(d))) {
    try {
      if (!(await readFile(`/proc/${pid}/environ`, "utf8")).split("\0").includes(`SVC_ENDPOINT_ID=${endpointId}`)) continue;
      if (/^\d+ \(.*\) Z/.test(await readFile(`/proc/${pid}/stat`, "utf8"))) continue;
      n++;
    } catch {
      // exited meanwhile, or not ours to read: not a worker of this test
    }
  }
  return n;
}

describe.skipIf(unavailable !== undefined)("three replicas on one database", () => {
  let work: string;
  let database: TestPostgres;
  let storeUrl: string;
  let proxy: { server: Server; url: string };
  let hooks: HttpServer;
  let hookUrl: string;
  const delivered = new Map<string, number>();
  const replicas: ServerProcess[] = [];
  const alive = new Set<number>();
  let endpoint: string;

  const startReplica = (i: number) =>
    startServerProcess({
      dataDir: join(work, `r${i}`),
      env: {
        SVC_API_KEY: KEY,
        SVC_STORE_URL: storeUrl,
        SVC_CLUSTER_URL: proxy.url,
        SVC_WEBHOOK_ALLOW: "127.0.0.1",
        // The leader wave queues 10,000 jobs and 500 /runsync on one endpoint at once: above the default queue
        // quotas, which this test is not about.
        SVC_QUEUE_QUOTA_ENDPOINT_JOBS: "100000",
        SVC_QUEUE_QUOTA_USER_JOBS: "100000",
        ...UNSANDBOXED,
      },
    });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "svc-three-"));
    database = await startPostgres();
    storeUrl = await database.createDatabase();
    proxy = await roundRobin(() => replicas.filter((_, i) => alive.has(i)).map((r) => Number(new URL(r.url).port)));
    hooks = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const id = (JSON.parse(body) as { id: string }).id;
        delivered.set(id, (delivered.get(id) ?? 0) + 1);
        res.end();
      });
    });
    await new Promise<void>((r) => hooks.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hook`;
    for (let i = 0; i < 3; i++) {
      replicas.push(await startReplica(i));
      alive.add(i);
    }
    // Asynchronous: the proxy runs in this process and must go on serving meanwhile.
    const deployed = await deployFixture(copyFixture("cluster-app", work), proxy.url, KEY).catch((err: Error) => {
      throw new Error(`${err.message}\n${replicas.map((r, i) => `--- r${i}\n${r.log()}`).join("\n")}`);
    });
    expect(deployed.stdout).toContain("cluster-app");
    // A replica that did not make the deploy sees it within its sync period.
    for (const until = Date.now() + 5_000; !endpoint && Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
      endpoint = (await api("GET", "/v1/apps/cluster-app/environments/prod").catch(() => undefined))?.body?.endpoints?.[0]?.id;
    }
    expect(endpoint).toBeDefined();
  }, 180_000);

  afterAll(async () => {
    for (const r of replicas) r.child.kill("SIGKILL");
    // Workers a killed replica started outlive it (they went on working through the proxy): end them too.
    for (let i = 0; i < 3; i++) {
      const dir = join(work, `r${i}`, "workers");
      if (!existsSync(dir)) continue;
      for (const file of readdirSync(dir)) {
        const { pid } = JSON.parse(readFileSync(join(dir, file), "utf8")) as { pid: number };
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    proxy?.server.close();
    hooks?.close();
    await database?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  async function api(method: string, path: string, body?: unknown) {
    const res = await fetch(`${proxy.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
  }

  /** The replica serving jobs now: the one whose address the database's lease names. */
  async function jobsReplica(): Promise<number> {
    const db = new pg.Client({ connectionString: storeUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ address: string }>(
        "SELECT address FROM svc_leases WHERE expires_at > (extract(epoch from clock_timestamp()) * 1000)::bigint",
      );
      const i = replicas.findIndex((r, n) => alive.has(n) && rows.some((row) => row.address === r.url));
      if (i < 0) throw new Error(`no live replica holds the lease to serve jobs (${JSON.stringify(rows)})`);
      return i;
    } finally {
      await db.end();
    }
  }

  /**
   * One wave: `total` /run (every 25th with a webhook) and `sync` /runsync from 12 + 1 clients; `kill()` at 30%.
   * Then every check of the file's header.
   */
  async function wave(name: string, total: number, sync: number, victim: number) {
    const mark = join(work, `${name}.txt`);
    const acknowledged = new Map<string, string>();
    const withHook = new Set<string>();
    /** Tags a client sent again after a connection broke off: the first attempt may have made a job too. */
    const resent = new Set<string>();
    const syncAnswers: Array<{ tag: string; body: any }> = [];
    const statuses: Record<string, number> = {};
    let killed: number | undefined;
    let sent = 0;
    let sampling = true;
    let mostWorkers = 0;
    const sampler = (async () => {
      while (sampling) {
        mostWorkers = Math.max(mostWorkers, await workerProcesses(endpoint));
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    // Clients as they are written against a service: a 503 (or a connection that fails) is tried again shortly.
    const untilAnswered = async (tag: string, path: string, body: unknown) => {
      for (const giveUp = Date.now() + 60_000; ; ) {
        const r = await api("POST", path, body).catch(() => ({ status: 0, body: undefined }));
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        if ((r.status !== 503 && r.status !== 0) || Date.now() > giveUp) return r;
        if (r.status === 0) resent.add(tag);
        await new Promise((res) => setTimeout(res, 250));
      }
    };
    const submitter = async () => {
      while (sent < total) {
        const n = sent++;
        const tag = `${name}-run${n}`;
        const hook = n % 25 === 0;
        const r = await untilAnswered(tag, `/v2/${endpoint}/run`, { input: { tag, mark }, ...(hook ? { webhook: hookUrl } : {}) });
        if (r.status === 200) {
          acknowledged.set(r.body.id, tag);
          if (hook) withHook.add(r.body.id);
        }
        if (killed === undefined && acknowledged.size >= total * 0.3) {
          killed = victim;
          alive.delete(killed);
          replicas[killed]!.child.kill("SIGKILL");
        }
      }
    };
    const syncer = async () => {
      for (let i = 0; i < sync; i++) {
        const tag = `${name}-sync${i}`;
        const r = await untilAnswered(tag, `/v2/${endpoint}/runsync`, { input: { tag, mark } });
        if (r.status === 200 && r.body.status === "COMPLETED") syncAnswers.push({ tag, body: r.body });
      }
    };
    const started = Date.now();
    await Promise.all([...Array.from({ length: 12 }, submitter), syncer()]);
    const submittedMs = Date.now() - started;
    expect(killed).toBeDefined();
    // Through the kill, every submission was answered in the end.
    expect(acknowledged.size).toBe(total);

    // Every acknowledged job completes, with its own output (16 readers at once).
    const deadline = Date.now() + 180_000;
    const ids = [...acknowledged];
    const reader = async () => {
      for (let next = ids.pop(); next; next = ids.pop()) {
        const [id, tag] = next;
        for (;;) {
          const r = await api("GET", `/v2/${endpoint}/status/${id}`).catch(() => undefined);
          if (r?.body?.status === "COMPLETED") {
            expect(r.body.output).toEqual({ tag });
            break;
          }
          if (Date.now() > deadline) throw new Error(`job ${id} (${tag}) is still ${JSON.stringify(r?.body)}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, reader));
    for (const answer of syncAnswers) expect(answer.body.output).toEqual({ tag: answer.tag });
    expect(syncAnswers.length).toBeGreaterThan(sync * 0.9);

    // Every webhook arrives (from whichever replica serves jobs when the job ends).
    for (const until = Date.now() + 60_000; [...withHook].some((id) => !delivered.has(id)) && Date.now() < until; )
      await new Promise((r) => setTimeout(r, 200));
    expect([...withHook].filter((id) => !delivered.has(id))).toEqual([]);
    sampling = false;
    await sampler;

    const runs = readFileSync(mark, "utf8").trim().split("\n");
    const counts = new Map<string, number>();
    for (const tag of runs) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    for (const tag of acknowledged.values()) expect(counts.get(tag) ?? 0).toBeGreaterThanOrEqual(1);
    const twice = [...acknowledged.values()].filter((tag) => !resent.has(tag) && (counts.get(tag) ?? 0) > 1);
    // Only jobs running when their replica died may run again (their leases lapsed): at most what its workers held.
    expect(twice.length).toBeLessThanOrEqual(WORKERS_MAX * 4);
    expect(mostWorkers).toBeGreaterThan(0);
    expect(mostWorkers).toBeLessThanOrEqual(WORKERS_MAX);
    console.log(
      `three replicas, ${name}: ${acknowledged.size}/${total} /run acknowledged in ${submittedMs} ms, statuses ${JSON.stringify(statuses)}, ` +
        `${syncAnswers.length}/${sync} /runsync COMPLETED, ${withHook.size} webhooks delivered, ${twice.length} ran twice, at most ${mostWorkers} worker processes`,
    );
  }

  it("completes every acknowledged job across the death of the replica serving jobs; workersMax holds", async () => {
    await wave("leader", 10_000, 500, await jobsReplica());
    // The workers the dead replica started were adopted by the one that took over, not doubled.
    expect(replicas[await jobsReplica()]!.log()).toMatch(/adopted worker \S+ of endpoint count, started by another replica/);
  }, 600_000);

  it("loses nothing when a replica that does not serve jobs dies mid-wave", async () => {
    // The killed replica comes back (as a follower now) before the next wave.
    const back = [0, 1, 2].find((i) => !alive.has(i))!;
    replicas[back] = await startReplica(back);
    alive.add(back);
    const serving = await jobsReplica();
    await wave("follower", 5_000, 100, [...alive].find((i) => i !== serving)!);
    expect(await jobsReplica()).toBe(serving);
  }, 600_000);
});
