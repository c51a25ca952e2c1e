// The job API beside the queues users would run instead (bench/peer-queue.mjs): svc on SQLite vs BullMQ on
// Redis, svc on PostgreSQL vs graphile-worker and pg-boss on the same PostgreSQL server, end to end in alternating
// rounds; /runsync p50 at concurrency 1 vs BullMQ's waitUntilFinished. BENCH_ROUNDS sets the number of rounds
// (default 5).
import { measureQueuePeers } from "./peer-queue.mjs";

export const title = "job API vs. BullMQ, graphile-worker and pg-boss (end to end, /runsync)";

export async function run() {
  const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
  return measureQueuePeers({ rounds, onProgress: (line) => process.stderr.write(`  ${line}\n`) });
}
