// The job API with the state in PostgreSQL (one replica; a throwaway server with its default durability, fsync
// on): /run completed end to end and /runsync, beside plain loopback HTTP measured in the same run.
import { measureJobApi } from "./job-workload.mjs";
import { postgresUnavailable, startPostgres } from "../scripts/throwaway-postgres.mjs";

export const title = "job API on PostgreSQL (1 replica)";

export async function run() {
  const unavailable = postgresUnavailable();
  if (unavailable) throw new Error(`no PostgreSQL here: ${unavailable}`);
  const server = await startPostgres({ durable: true });
  try {
    const storeUrl = await server.createDatabase("svc_bench");
    const { p50, b50, doneRate, plainRate } = await measureJobApi({ storeUrl });
    return [
      {
        name: "/runsync p50, PostgreSQL",
        value: p50,
        unit: "ms",
        baselineName: "3 plain loopback round trips p50",
        baseline: b50,
        ratio: p50 / b50,
        target: "",
        met: undefined,
      },
      {
        name: "/run completed end to end, PostgreSQL",
        value: doneRate,
        unit: "jobs/s",
        baselineName: "plain loopback requests/s (medians of 3 rounds, each plain then /run)",
        baseline: plainRate,
        ratio: doneRate / plainRate,
        target: ">= 0.4x",
        met: doneRate / plainRate >= 0.4,
      },
    ];
  } finally {
    await server.stop();
  }
}
