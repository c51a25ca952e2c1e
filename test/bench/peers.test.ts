// The peer harnesses of `npm run bench` (bench/peer-lb.mjs, bench/peer-queue.mjs), one tiny round each, so that
// they cannot rot between bench runs: every peer starts, is measured, and comes back as a row with figures; a
// peer that cannot start here comes back as a row saying why. No timing is asserted (the bench is the test of
// speed).
import { describe, expect, it } from "vitest";
import { lbScenarios, measureLbPeers } from "../../bench/peer-lb.mjs";
import { measureQueuePeers } from "../../bench/peer-queue.mjs";
import { HAPROXY, NGINX, REDIS, missing, startNginx } from "../../bench/peer-servers.mjs";
import { postgresUnavailable } from "../postgres.js";

interface Row {
  name: string;
  value: number | string;
  baselineName: string;
  baseline: number | string;
  ratio: number | string;
  spread?: [number, number];
  target: string;
  met?: boolean;
  note?: string;
}

/** A measured row: figures, a ratio, a spread, and the note saying the peer's settings. */
function expectMeasured(row: Row | undefined) {
  expect(row, "row").toBeDefined();
  for (const figure of [row!.value, row!.baseline, row!.ratio, ...(row!.spread ?? [])]) {
    expect(typeof figure).toBe("number");
    expect(Number.isFinite(figure) && (figure as number) > 0).toBe(true);
  }
  expect(row!.spread).toHaveLength(2);
  expect(row!.note).toBeTruthy();
}

/**
 * Where `why` says the peer cannot run here, its row must say so; else it must hold figures. In CI, .ci/run
 * installs every peer, so one missing there is a failure, not a row to accept.
 */
function expectRow(row: Row | undefined, why: string | undefined) {
  if (!why) return expectMeasured(row);
  if (/^(1|true|yes)$/i.test(process.env.CI ?? "")) throw new Error(`CI is set and a peer cannot run: ${why} (.ci/run installs it)`);
  expect(row?.baseline).toBe("-");
  expect(row?.note).toContain("could not start");
}

describe("peer harnesses (one tiny round each)", () => {
  it("LB: svc beside nginx and HAProxy at every load, and a peer that cannot start reported as a row", { timeout: 90_000 }, async () => {
    const scenarios = lbScenarios({ smallTotal: 100, largeTotal: 20, latencyN: 20 }).map((s) => ({ ...s, warmup: 5 }));
    const { rows } = (await measureLbPeers({
      rounds: 1,
      scenarios,
      peerStarters: [
        ["nginx", (url: string) => startNginx(url)],
        ["HAProxy", (url: string) => import("../../bench/peer-servers.mjs").then((m) => m.startHaproxy(url))],
        ["absent proxy", (url: string) => startNginx(url, { binary: "/nonexistent/nginx" })],
      ],
    })) as { rows: Row[] };
    for (const s of scenarios) {
      expectRow(
        rows.find((r) => r.name === `svc vs nginx: ${s.label}`),
        missing(NGINX, "nginx-light"),
      );
      expectRow(
        rows.find((r) => r.name === `svc vs HAProxy: ${s.label}`),
        missing(HAPROXY, "haproxy"),
      );
      const absent = rows.find((r) => r.name === `svc vs absent proxy: ${s.label}`);
      expect(absent?.note).toBe("absent proxy could not start: /nonexistent/nginx is not installed (Debian: apt-get install nginx-light)");
      expect(typeof absent?.value).toBe("number");
    }
    expect(rows.find((r) => r.name.startsWith("svc vs nginx"))?.target).toBe("<= 1.1x");
  });

  it("queues: svc beside BullMQ, graphile-worker and pg-boss end to end, and /runsync beside BullMQ", { timeout: 120_000 }, async () => {
    const rows = (await measureQueuePeers({ rounds: 1, jobs: 50, runsyncN: 5 })) as Row[];
    const noRedis = missing(REDIS, "redis-server");
    const noPostgres = postgresUnavailable();
    expectRow(
      rows.find((r) => r.name.startsWith("svc (SQLite) vs BullMQ: jobs/s end to end")),
      noRedis,
    );
    expectRow(
      rows.find((r) => r.name.startsWith("svc (PostgreSQL) vs graphile-worker: jobs/s end to end")),
      noPostgres,
    );
    expectRow(
      rows.find((r) => r.name.startsWith("svc (PostgreSQL) vs pg-boss: jobs/s end to end")),
      noPostgres,
    );
    expectRow(
      rows.find((r) => r.name.startsWith("svc (SQLite) /runsync vs BullMQ")),
      noRedis,
    );
    expect(rows.map((r) => r.target)).toEqual([">= 1x", ">= 2x", ">= 2x", "<= 1x"]);
  });
});
