// The job API on the embedded store: /runsync latency and /run throughput through the real service, SQLite file
// and process workers, each beside plain loopback HTTP measured in the same run (job-workload.mjs).
// Traces are off here, as by default: off, no OpenTelemetry code is loaded and a /run on the LB front never reaches
// tracing at all (through node:http it costs one property read), so these rows are also tracing-off's cost
// (docs/observability.md, "Traces"). No row measures traces on: that needs a collector and is the SDK's cost.
import { measureJobApi, measureMetricsCost } from "./job-workload.mjs";

export const title = "job API: /runsync latency, /run throughput";

export async function run() {
  const { p50, b50, p99, b99, acceptRate, doneRate, plainRate, clients } = await measureJobApi();
  const metrics = await measureMetricsCost();
  return [
    {
      name: "/runsync p50",
      value: p50,
      unit: "ms",
      baselineName: "3 plain loopback round trips p50",
      baseline: b50,
      ratio: p50 / b50,
      target: "<= 5x",
      met: p50 / b50 <= 5,
    },
    {
      name: "/runsync p99",
      value: p99,
      unit: "ms",
      baselineName: "3 plain loopback round trips p99",
      baseline: b99,
      ratio: p99 / b99,
      target: "",
      met: undefined,
    },
    {
      name: `/run accepted (${clients} clients)`,
      value: acceptRate,
      unit: "jobs/s",
      baselineName: "plain loopback requests/s (medians of 3 rounds)",
      baseline: plainRate,
      ratio: acceptRate / plainRate,
      target: ">= 3000 jobs/s",
      met: acceptRate >= 3000,
    },
    {
      name: "/run completed end to end (2 workers)",
      value: doneRate,
      unit: "jobs/s",
      baselineName: "plain loopback requests/s (medians of 3 rounds)",
      baseline: plainRate,
      ratio: doneRate / plainRate,
      target: ">= 3000 jobs/s",
      met: doneRate >= 3000,
    },
    {
      name: `/run accepted with metrics on (${metrics.clients} clients)`,
      value: metrics.on,
      unit: "jobs/s",
      baselineName: `the same with SVC_METRICS=off (${metrics.rounds} rounds each, taken in turn; ratio: median of the rounds')`,
      baseline: metrics.off,
      ratio: metrics.ratio,
      spread: metrics.spread,
      target: ">= 0.95x (metrics cost < 5%)",
      met: metrics.ratio >= 0.95,
    },
  ];
}
