// The submitting side of the queue comparison (bench/peer-queue.mjs), a process of its own as real clients are,
// the same for every queue: `concurrency` loops submit `total` trivial jobs ({ input: { i } }) with the queue's
// own client (svc: the SDK's JobsClient over its HTTP job API, POST /run; BullMQ: Queue.add; graphile-worker: WorkerUtils.addJob;
// pg-boss: send), or, in "runsync" mode, one job at a time waiting for each result (svc: POST /runsync; BullMQ:
// Queue.add then Job.waitUntilFinished).
//
//   node bench/queue-client.mjs '<json>'  ->  one JSON line: { startedAt, endedAt, rps } or { p50, samples }
//
// json: { peer: "svc" | "bullmq" | "graphile-worker" | "pg-boss", mode: "submit" | "runsync", total, concurrency,
//         url (svc: the endpoint's URL; PostgreSQL peers: the database's), key (svc), redis ({ host, port }),
//         queue (the queue's or task's name) }
import { percentile, pool } from "./http.mjs";

const o = JSON.parse(process.argv[2]);

/** `{ submit(i), runsync(i)?, close() }` for the peer named. */
async function clientOf(peer) {
  if (peer === "svc") {
    // svc's own client, as BullMQ's is its Queue: the SDK's JobsClient (keep-alive sockets of its own).
    const { JobsClient } = await import("svc");
    const jobs = new JobsClient(o.url, o.key);
    return {
      async submit(i) {
        const job = await jobs.run({ i });
        if (!job.id) throw new Error(`/run answered ${JSON.stringify(job)}`);
      },
      async runsync(i) {
        const record = await jobs.runsync({ i });
        if (record.status !== "COMPLETED" || record.output?.i !== i) throw new Error(`/runsync answered ${JSON.stringify(record).slice(0, 200)}`);
      },
      close: async () => undefined,
    };
  }
  if (peer === "bullmq") {
    const { Queue, QueueEvents } = await import("bullmq");
    const queue = new Queue(o.queue, { connection: o.redis });
    const events = o.mode === "runsync" ? new QueueEvents(o.queue, { connection: o.redis }) : undefined;
    await queue.waitUntilReady();
    const runsync = async (i, ttl = 60_000) => {
      const job = await queue.add("echo", { i });
      const result = await job.waitUntilFinished(events, ttl);
      if (result?.i !== i) throw new Error(`BullMQ job ${job.id} answered ${JSON.stringify(result)}`);
    };
    if (events) {
      await events.waitUntilReady();
      // QueueEvents hears only what happens after its first read of the events stream, which comes after it is
      // "ready": a job completed in between is never heard of, and waitUntilFinished would wait forever. A first
      // job is waited for with a short deadline, and tried again until its completion is heard.
      for (let attempt = 1; ; attempt++) {
        try {
          await runsync(-1000 - attempt, 1000);
          break;
        } catch (err) {
          if (attempt === 10) throw err;
        }
      }
    }
    return {
      submit: (i) => queue.add("echo", { i }),
      runsync,
      close: async () => {
        await events?.close();
        await queue.close();
      },
    };
  }
  if (peer === "graphile-worker") {
    const { makeWorkerUtils } = await import("graphile-worker");
    // As many connections as submitters, as svc's client has sockets (the default pool has 10).
    const utils = await makeWorkerUtils({ connectionString: o.url, maxPoolSize: o.concurrency });
    return { submit: (i) => utils.addJob(o.queue, { i }), close: () => utils.release() };
  }
  if (peer === "pg-boss") {
    const { default: PgBoss } = await import("pg-boss");
    // A producer only: no maintenance or scheduling in this process (the workers' instances do that).
    const boss = new PgBoss({ connectionString: o.url, max: o.concurrency, supervise: false, schedule: false, migrate: false });
    boss.on("error", (err) => process.stderr.write(`pg-boss: ${err.message}\n`));
    await boss.start();
    return {
      async submit(i) {
        const id = await boss.send(o.queue, { i });
        if (!id) throw new Error("pg-boss did not take the job");
      },
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  }
  throw new Error(`unknown peer ${peer}`);
}

const client = await clientOf(o.peer);
try {
  if (o.mode === "runsync") {
    for (let i = 0; i < (o.warmup ?? 20); i++) await client.runsync(-1 - i);
    const samples = [];
    for (let i = 0; i < o.total; i++) {
      const started = performance.now();
      await client.runsync(i);
      samples.push(performance.now() - started);
    }
    process.stdout.write(`${JSON.stringify({ p50: percentile(samples, 50), samples: samples.length })}\n`);
  } else {
    const startedAt = Date.now();
    const ms = await pool(o.total, o.concurrency, (i) => client.submit(i));
    process.stdout.write(`${JSON.stringify({ startedAt, endedAt: Date.now(), rps: (o.total / ms) * 1000 })}\n`);
  }
} finally {
  await client.close();
}
process.exit(0);
