// The service's clocks (the engine's tick and the reaping of outside workers that fell silent, the hand-off rescan,
// the retention sweeps) and its shutdown, in order.

import { type Server, type ServerResponse } from "node:http";
import { errorMessage } from "../errors.js";
import { JobEngine } from "./engine/index.js";
import { ServiceMetrics } from "./metrics/index.js";
import { Scaler } from "./workers/scaler.js";
import { Webhooks } from "./webhooks/index.js";
import { JobsRole } from "./cluster/jobs-role.js";
import { IdempotentSubmits } from "./idempotency/index.js";
import { type S3Origin } from "./volumes/s3-origin.js";
import { LbFront } from "./lb/front.js";
import { LbRouter } from "./lb/index.js";
import { HostGpus } from "../gpus/host.js";
import { ReleaseManager } from "./releases/manager.js";

/** The replica serving jobs looks for handed-off jobs this often besides when the change feed tells it. */
export const HANDOFF_RESCAN_MS = 2_000;
/** The service's clocks: the engine's tick, the hand-off rescan and the retention sweep. Unref'd: they keep no process alive. */
export function startTimers(t: {
  engine: JobEngine;
  leaseMs: number;
  retentionSweepMs: number;
  idempotency: Pick<IdempotentSubmits, "sweep">;
  servesJobs(): boolean;
  adoptHandedOff(): void;
  log(message: string): void;
}): NodeJS.Timeout[] {
  const { engine, leaseMs } = t;
  const ticker = setInterval(
    () => {
      engine.tick();
      // Outside workers that stopped talking to us no longer count in /health.
      const now = Date.now();
      for (const w of engine.workers.values()) {
        if (!w.managed && w.polling === 0 && w.held.size === 0 && now - w.lastSeen > Math.max(3 * leaseMs, 60_000)) engine.workerGone(w.id);
      }
    },
    Math.max(20, Math.min(250, Math.floor(leaseMs / 4))),
  );
  // A notice is a hint (lost while the listener reconnects, or sent before this replica listened): rescan.
  const handoffRescan = setInterval(() => {
    if (t.servesJobs()) t.adoptHandedOff();
  }, HANDOFF_RESCAN_MS);
  const sweeper = setInterval(() => {
    // Replicas on one database: the one serving jobs sweeps for all (the others' deletes would only repeat it).
    if (!t.servesJobs()) return;
    engine.sweep().catch((err: unknown) => t.log(`retention sweep failed: ${errorMessage(err)}`));
    engine.sweepJobHistory().catch((err: unknown) => t.log(`job history sweep failed: ${errorMessage(err)}`));
    engine.sweepLogs().catch((err: unknown) => t.log(`log retention sweep failed: ${errorMessage(err)}`));
    t.idempotency.sweep().catch((err: unknown) => t.log(`idempotency key sweep failed: ${errorMessage(err)}`));
  }, t.retentionSweepMs);
  const timers = [ticker, handoffRescan, sweeper];
  for (const timer of timers) timer.unref();
  return timers;
}
/**
 * Close the service: its clocks first, then what starts and stops workers, the engine (its writes settled), the
 * log followers and the server (idle connections at once, the others after 200 ms), the webhook deliveries, the
 * jobs lease, and last the storage and the data directory's lock.
 */
export async function shutdown(s: {
  timers: NodeJS.Timeout[];
  releases: ReleaseManager;
  lb: LbRouter;
  hostGpus?: HostGpus;
  scaler?: Scaler;
  engine: JobEngine;
  followers: Set<ServerResponse>;
  server: Server;
  s3Origin?: S3Origin;
  front?: LbFront;
  webhooks: Pick<Webhooks, "close">;
  jobsRole?: JobsRole;
  metrics: Pick<ServiceMetrics, "close">;
  releaseStorage(): Promise<void>;
}): Promise<void> {
  for (const timer of s.timers) clearInterval(timer);
  s.releases.close();
  s.lb.close();
  s.hostGpus?.close();
  await s.scaler?.close();
  await s.engine.close();
  for (const res of s.followers) res.end();
  await new Promise<void>((resolve) => {
    s.server.close(() => resolve());
    s.front?.close();
    s.server.closeIdleConnections();
    setTimeout(() => {
      s.front?.destroy();
      s.server.closeAllConnections();
    }, 200).unref();
  });
  await s.s3Origin?.close();
  await s.webhooks.close();
  await s.jobsRole?.stop();
  // After the workers stopped: their time up to now is written.
  await s.metrics.close();
  await s.releaseStorage();
}
