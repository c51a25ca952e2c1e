// One worker process of a library queue in the queue comparison (bench/peer-queue.mjs), as svc's bench endpoint
// has process workers: it completes trivial jobs (the answer is the job's input) with `concurrency` in flight,
// and tells its parent (IPC) how many it has completed, as the queue reports them done: BullMQ's `completed`
// event (after Redis moved the job), graphile-worker's `job:complete` (after the job row was deleted). pg-boss
// has no such event; the parent counts its completed rows itself.
//
//   fork("bench/queue-worker-child.mjs", ['<json>'])   json: { peer, concurrency, queue, url?, redis?, settings? }
//   -> { ready: true }, then { completed: n } whenever n changed (at most every 10 ms); { stop: true } ends it.
const o = JSON.parse(process.argv[2]);
let completed = 0;
let stop = async () => undefined;

if (o.peer === "bullmq") {
  const { Worker } = await import("bullmq");
  const worker = new Worker(o.queue, async (job) => job.data, {
    connection: { ...o.redis, maxRetriesPerRequest: null },
    concurrency: o.concurrency,
    // BullMQ's advice for production: keep a bounded number of finished jobs, not all of them.
    removeOnComplete: { count: 1000 },
    removeOnFail: { count: 5000 },
  });
  worker.on("completed", () => completed++);
  worker.on("error", (err) => process.stderr.write(`bullmq worker: ${err.message}\n`));
  await worker.waitUntilReady();
  stop = () => worker.close();
} else if (o.peer === "graphile-worker") {
  const { run } = await import("graphile-worker");
  const quiet = {
    debug() {},
    info() {},
    warn: (m) => process.stderr.write(`graphile-worker: ${m}\n`),
    error: (m) => process.stderr.write(`graphile-worker: ${m}\n`),
  };
  const { Logger } = await import("graphile-worker");
  const runner = await run({
    connectionString: o.url,
    concurrency: o.concurrency,
    noHandleSignals: true,
    logger: new Logger(() => (level, message) => quiet[level]?.(message)),
    taskList: { [o.queue]: async (payload) => payload },
    ...(o.settings ?? {}),
  });
  runner.events.on("job:complete", ({ error }) => {
    if (!error) completed++;
  });
  stop = () => runner.stop();
} else if (o.peer === "pg-boss") {
  const { default: PgBoss } = await import("pg-boss");
  const boss = new PgBoss({ connectionString: o.url, migrate: false });
  boss.on("error", (err) => process.stderr.write(`pg-boss: ${err.message}\n`));
  await boss.start();
  // v10 hands a work() handler a batch (an array) and completes all its jobs once the handler resolves; each
  // work() call is one polling loop (v11's localConcurrency makes several; here, as many calls).
  for (let i = 0; i < (o.settings?.subscriptions ?? 1); i++) await boss.work(o.queue, o.settings?.work ?? {}, async (jobs) => jobs.map((job) => job.data));
  stop = () => boss.stop({ graceful: true, wait: true });
} else {
  throw new Error(`unknown peer ${o.peer}`);
}

let reported = -1;
const ticker = setInterval(() => {
  if (completed !== reported) {
    reported = completed;
    process.send({ completed });
  }
}, 10);
process.on("message", async (message) => {
  if (!message?.stop) return;
  clearInterval(ticker);
  await stop();
  process.exit(0);
});
process.on("disconnect", () => process.exit(0));
process.send({ ready: true });
