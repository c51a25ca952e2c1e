// svc's job API beside the queues users would run instead, end to end (submitted, taken by a worker, completed)
// in alternating rounds: svc on its embedded SQLite beside BullMQ on Redis, svc on PostgreSQL beside
// graphile-worker and pg-boss on the same PostgreSQL server (a database each); and /runsync at concurrency 1
// beside BullMQ's Job.waitUntilFinished. Used by bench/peers-queue.bench.mjs (full size) and
// test/bench/peers.test.ts (one tiny round, so the harness cannot rot).
//
// The same shape for every queue: `submitters` loops in one client process (queue-client.mjs) submit `jobs`
// trivial jobs with the queue's own client (svc's over HTTP); two worker processes, `concurrency` jobs in
// flight each, answer each job with its input (svc: the bench-trivial endpoint, workers [2, 2] with
// maxConcurrency 16; the libraries: queue-worker-child.mjs). A round's rate is jobs completed over the time
// from the first submission to the poll (every 20 ms, for all alike) that saw the last one completed.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFile, fork } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";
import { median, request, startSvcChild } from "./http.mjs";
import { BENCH_KEY } from "./svc-service.mjs";
import { startRedis } from "./peer-servers.mjs";
import { postgresUnavailable, startPostgres } from "../scripts/throwaway-postgres.mjs";

const run_ = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const bench = (file) => join(root, "bench", file);

/** The targets: svc's rate over the peer's (queues), svc's p50 over BullMQ's (runsync). */
export const QUEUE_TARGETS = { bullmq: 1, postgres: 2, runsync: 1 };

/**
 * The settings each library runs with: its documented defaults, plus what its documentation recommends for
 * throughput. Each row's note says them.
 */
export const PEER_SETTINGS = {
  bullmq: {
    note: "BullMQ Worker, concurrency 16 in each of 2 processes, removeOnComplete {count: 1000} (its production advice), ioredis with maxRetriesPerRequest null; Redis with Debian's default persistence (RDB, no AOF)",
  },
  "graphile-worker": {
    settings: {},
    note: "graphile-worker run(), concurrency 16 in each of 2 processes, its defaults otherwise (LISTEN/NOTIFY for new jobs, pollInterval 2 s, prepared statements); jobs added with WorkerUtils.addJob",
  },
  "pg-boss": {
    // v10 fetches a batch a poll and waits out the polling interval between polls (unless notified, which
    // only a send() in the same process does); its documentation's lever for throughput is the batch size.
    settings: { work: { batchSize: 100, pollingIntervalSeconds: 0.5 }, subscriptions: 16 },
    note: "pg-boss work() x16 in each of 2 processes, batchSize 100, pollingIntervalSeconds 0.5 (its minimum), defaults otherwise (queue policy standard, maintenance on)",
  },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * svc's service with the bench-trivial endpoint deployed (process workers), in a process of its own
 * (svc-child.mjs) as redis-server and PostgreSQL are: a contender.
 */
async function startSvc({ name, storeUrl }) {
  const { url, close } = await startSvcChild("queue", storeUrl);
  return {
    name,
    client: { peer: "svc", url, key: BENCH_KEY },
    async completed() {
      return JSON.parse((await request(`${url}/health`, { headers: { authorization: `Bearer ${BENCH_KEY}` } })).body).jobs.completed;
    },
    close,
  };
}

/** Two worker processes of a library queue (queue-worker-child.mjs); `completed()` sums what they report. */
async function startWorkerProcesses(peer, options, count = 2) {
  const children = [];
  const counts = [];
  const stopAll = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
            child.once("exit", () => (clearTimeout(timer), resolve()));
            child.send({ stop: true });
          }),
      ),
    );
  };
  try {
    for (let i = 0; i < count; i++) {
      const child = fork(bench("queue-worker-child.mjs"), [JSON.stringify({ peer, ...options })], {
        stdio: ["ignore", "inherit", "pipe", "ipc"],
        execArgv: [],
      });
      let stderr = "";
      child.stderr.on("data", (d) => {
        stderr = (stderr + d).slice(-2000);
        process.stderr.write(d);
      });
      children.push(child);
      counts.push(0);
      await new Promise((resolve, reject) => {
        child.on("message", (m) => {
          if (m.ready) resolve();
          if (typeof m.completed === "number") counts[i] = m.completed;
        });
        child.once("exit", (code) =>
          reject(new Error(`${peer} worker exited (${code}) before it was ready: ${stderr.trim().split("\n").slice(-3).join(" / ")}`)),
        );
      });
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  return { completed: async () => counts.reduce((a, b) => a + b, 0), stop: stopAll };
}

async function startBullmq(redis, concurrency) {
  const connection = { host: "127.0.0.1", port: redis.port };
  const queue = "svc-bench";
  const workers = await startWorkerProcesses("bullmq", { queue, concurrency, redis: connection });
  return { name: "BullMQ", client: { peer: "bullmq", redis: connection, queue }, completed: workers.completed, close: workers.stop };
}

async function startGraphile(url, concurrency) {
  const { runMigrations } = await import("graphile-worker");
  // The schema installed once, before two processes race to install it.
  await runMigrations({ connectionString: url, logger: undefined });
  const queue = "echo";
  const workers = await startWorkerProcesses("graphile-worker", { queue, concurrency, url, settings: PEER_SETTINGS["graphile-worker"].settings });
  return { name: "graphile-worker", client: { peer: "graphile-worker", url, queue }, completed: workers.completed, close: workers.stop };
}

async function startPgBoss(url, concurrency) {
  const { default: PgBoss } = await import("pg-boss");
  const queue = "echo";
  // Its schema and the queue (v10 needs queues created) made once, before the workers start.
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
  boss.on("error", () => undefined);
  await boss.start();
  await boss.createQueue(queue);
  await boss.stop({ graceful: false, wait: true });
  const workers = await startWorkerProcesses("pg-boss", { queue, concurrency, url, settings: PEER_SETTINGS["pg-boss"].settings });
  // pg-boss has no per-job completion event: its completed rows are counted (v10 keeps them until archived).
  const counter = new pg.Client({ connectionString: url });
  await counter.connect();
  return {
    name: "pg-boss",
    client: { peer: "pg-boss", url, queue },
    async completed() {
      const { rows } = await counter.query("SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'", [queue]);
      return rows[0].n;
    },
    async close() {
      await workers.stop();
      await counter.end();
    },
  };
}

/** One round of one contender: its end-to-end rate in jobs/s. */
async function endToEnd(contender, { jobs, submitters }) {
  const before = await contender.completed();
  const client = run_(
    process.execPath,
    [bench("queue-client.mjs"), JSON.stringify({ ...contender.client, mode: "submit", total: jobs, concurrency: submitters })],
    { maxBuffer: 1 << 20 },
  );
  let failed;
  client.catch((err) => (failed = err));
  let done = 0;
  let doneAt = Date.now();
  for (const deadline = Date.now() + 300_000; ; ) {
    if (failed) throw new Error(`${contender.name}'s client failed: ${failed.stderr?.trim().split("\n").slice(-3).join(" / ") || failed.message}`);
    done = (await contender.completed()) - before;
    doneAt = Date.now();
    if (done >= jobs) break;
    if (doneAt > deadline) throw new Error(`${contender.name}: ${done} of ${jobs} jobs completed after 300 s`);
    await sleep(20);
  }
  const { startedAt } = JSON.parse((await client).stdout);
  return (done / (doneAt - startedAt)) * 1000;
}

async function runsyncP50(contender, n) {
  const { stdout } = await run_(process.execPath, [bench("queue-client.mjs"), JSON.stringify({ ...contender.client, mode: "runsync", total: n, warmup: 20 })], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout).p50;
}

/** Starts a contender, or returns `{ name, error }` saying why it could not start. */
async function attempt(name, start) {
  try {
    return await start();
  } catch (err) {
    return { name, error: String(err?.message ?? err).split("\n")[0] };
  }
}

/**
 * Runs `warmupRounds` rounds not counted, then `rounds` rounds; in each, every contender once (their order turning
 * each round), then /runsync. Returns
 * rows in bench/run.mjs's format: medians of the per-round ratios, with their spread.
 */
export async function measureQueuePeers({
  rounds = 5,
  warmupRounds = 1,
  jobs = 5000,
  submitters = 16,
  concurrency = 16,
  runsyncN = 300,
  onProgress = () => {},
} = {}) {
  const closers = [];
  try {
    const svcSqlite = await startSvc({ name: "svc (SQLite)" });
    closers.push(() => svcSqlite.close());
    const redis = await attempt("Redis", () => startRedis());
    if (!redis.error) closers.push(() => redis.stop());
    const bullmq = redis.error
      ? { name: "BullMQ", error: `redis-server could not start: ${redis.error}` }
      : await attempt("BullMQ", () => startBullmq(redis, concurrency));
    if (!bullmq.error) closers.push(() => bullmq.close());

    const why = postgresUnavailable();
    let postgres;
    if (!why) {
      postgres = await attempt("PostgreSQL", () => startPostgres({ durable: true }));
      if (!postgres.error) closers.push(() => postgres.stop());
    }
    const pgError = why ?? postgres?.error;
    const onPostgres = (name, start) => (pgError ? { name, error: `no PostgreSQL: ${pgError}` } : attempt(name, start));
    const svcPostgres = await onPostgres("svc (PostgreSQL)", async () =>
      startSvc({ name: "svc (PostgreSQL)", storeUrl: await postgres.createDatabase("svc_bench") }),
    );
    const graphile = await onPostgres("graphile-worker", async () => startGraphile(await postgres.createDatabase("graphile_bench"), concurrency));
    const pgBoss = await onPostgres("pg-boss", async () => startPgBoss(await postgres.createDatabase("pgboss_bench"), concurrency));
    for (const c of [svcPostgres, graphile, pgBoss]) if (!c.error) closers.push(() => c.close());

    const contenders = [svcSqlite, bullmq, svcPostgres, graphile, pgBoss].filter((c) => !c.error);
    const rates = new Map(contenders.map((c) => [c.name, []]));
    const p50s = { svc: [], bullmq: [] };
    // `warmupRounds` first, not counted: every contender's processes are new, and V8 compiles svc's service over
    // its first several thousand requests.
    for (let round = 0; round < warmupRounds; round++) {
      for (const c of contenders) onProgress(`warm-up round (not counted): ${c.name} ${(await endToEnd(c, { jobs, submitters })).toFixed(0)} jobs/s`);
    }
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(k + round) % contenders.length];
        rates.get(c.name).push(await endToEnd(c, { jobs, submitters }));
        onProgress(`round ${round + 1}/${rounds}: ${c.name} ${rates.get(c.name).at(-1).toFixed(0)} jobs/s`);
      }
      if (!bullmq.error) {
        const pair =
          round % 2
            ? [
                [bullmq, "bullmq"],
                [svcSqlite, "svc"],
              ]
            : [
                [svcSqlite, "svc"],
                [bullmq, "bullmq"],
              ];
        for (const [c, key] of pair) p50s[key].push(await runsyncP50(c, runsyncN));
        onProgress(`round ${round + 1}/${rounds}: runsync p50 svc ${p50s.svc.at(-1).toFixed(3)} ms, BullMQ ${p50s.bullmq.at(-1).toFixed(3)} ms`);
      }
    }

    const rows = [];
    const compare = (svcSide, peer, target, settingsNote) => {
      const name = `${svcSide.name} vs ${peer.name}: jobs/s end to end (${jobs} jobs, ${submitters} submitters)`;
      const targetText = `>= ${target}x`;
      const failed = svcSide.error ?? peer.error;
      if (failed) {
        const who = svcSide.error ? svcSide.name : peer.name;
        const value = svcSide.error ? "-" : median(rates.get(svcSide.name));
        return rows.push({
          name,
          value,
          unit: "jobs/s",
          baselineName: `${peer.name}: could not start`,
          baseline: "-",
          ratio: "-",
          target: targetText,
          met: false,
          note: `${who} could not start: ${failed}`,
        });
      }
      const mine = rates.get(svcSide.name);
      const theirs = rates.get(peer.name);
      const ratios = mine.map((v, i) => v / theirs[i]);
      const ratio = median(ratios);
      rows.push({
        name,
        value: median(mine),
        unit: "jobs/s",
        baselineName: peer.name,
        baseline: median(theirs),
        ratio,
        spread: [Math.min(...ratios), Math.max(...ratios)],
        target: targetText,
        met: ratio >= target,
        note: `${settingsNote}; ${rounds} rounds after ${warmupRounds} not counted, ratio = svc's rate over the peer's, median of the rounds'`,
      });
    };
    compare(svcSqlite, bullmq, QUEUE_TARGETS.bullmq, PEER_SETTINGS.bullmq.note);
    compare(svcPostgres, graphile, QUEUE_TARGETS.postgres, PEER_SETTINGS["graphile-worker"].note);
    compare(svcPostgres, pgBoss, QUEUE_TARGETS.postgres, PEER_SETTINGS["pg-boss"].note);

    const runsyncName = "svc (SQLite) /runsync vs BullMQ add + waitUntilFinished: p50 at concurrency 1";
    if (bullmq.error) {
      rows.push({
        name: runsyncName,
        value: "-",
        unit: "ms",
        baselineName: "BullMQ: could not start",
        baseline: "-",
        ratio: "-",
        target: `<= ${QUEUE_TARGETS.runsync}x`,
        met: false,
        note: `BullMQ could not start: ${bullmq.error}`,
      });
    } else {
      const ratios = p50s.svc.map((v, i) => v / p50s.bullmq[i]);
      const ratio = median(ratios);
      rows.push({
        name: runsyncName,
        value: median(p50s.svc),
        unit: "ms",
        baselineName: "BullMQ",
        baseline: median(p50s.bullmq),
        ratio,
        spread: [Math.min(...ratios), Math.max(...ratios)],
        target: `<= ${QUEUE_TARGETS.runsync}x`,
        met: ratio <= QUEUE_TARGETS.runsync,
        note: `${runsyncN} jobs one at a time a round, each waited for (svc over HTTP, BullMQ with a QueueEvents listener); ${rounds} rounds after ${warmupRounds} not counted, ratio = svc's p50 over BullMQ's, median of the rounds'`,
      });
    }
    return rows;
  } finally {
    for (const close of closers.reverse()) await close().catch((err) => process.stderr.write(`peer-queue: closing: ${err.message}\n`));
  }
}
