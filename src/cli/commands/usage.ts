// `svc usage`: worker-seconds, GPU-seconds by type, jobs and load-balanced requests per endpoint and hour
// (GET /v1/usage): the caller's own; the operator may name a user, or read everyone's.
import type { Command } from "commander";
import { parseSince } from "../duration.js";
import { management, table } from "../management.js";
import { createOutput } from "../output.js";
import type { UsageAnswer } from "../../service/http/answers.js";

const seconds = (n: number) => n.toFixed(1);

export function register(program: Command): void {
  program
    .command("usage")
    .description("Worker-seconds, GPU-seconds (by GPU type), jobs and load-balanced requests per endpoint per hour")
    .option("--from <time>", "start: a duration back from now (2h, 1d), an ISO time or epoch ms (default: 24 hours before --to)", (v: string) =>
      String(parseSince(v, Date.now(), "--from")),
    )
    .option("--to <time>", "end: a duration back from now, an ISO time or epoch ms (default: now)", (v: string) => String(parseSince(v, Date.now(), "--to")))
    .option("--user <id>", "another user's usage (operator only; without it the operator reads every user's)")
    .option("--json", "print JSON")
    .action(async (o: { from?: string; to?: string; user?: string; json?: boolean }) => {
      const query = new URLSearchParams();
      if (o.from) query.set("from", o.from);
      if (o.to) query.set("to", o.to);
      if (o.user) query.set("userId", o.user);
      const usage = await management<UsageAnswer>("GET", `/v1/usage${query.size > 0 ? `?${query}` : ""}`);
      // Names where the key can see them (its own endpoints); another user's endpoint stays an id.
      const names = o.json ? new Map<string, string>() : await endpointNames();
      createOutput({ json: o.json }).result(usage, () => {
        const users = new Set(usage.hours.map((h) => h.userId));
        const rows = usage.hours.map((h) => ({
          ...h,
          endpoint: names.get(h.endpointId) ?? h.endpointId,
          gpuType: h.gpuType ?? "-",
          workerSeconds: seconds(h.workerSeconds),
          gpuSeconds: seconds(h.gpuSeconds),
        }));
        const byType = Object.entries(usage.totals.gpuSecondsByType)
          .map(([t, s]) => `${t} ${seconds(s)}`)
          .join(", ");
        return [
          `usage from ${usage.from} to ${usage.to}`,
          table(rows, [
            "hour",
            ...(users.size > 1 ? ["userId"] : []),
            "endpoint",
            "gpuType",
            "workerSeconds",
            "gpuSeconds",
            "jobs",
            // A load-balanced endpoint's work is its requests; a column only where one had any.
            ...(usage.totals.requests > 0 ? ["requests"] : []),
          ]),
          `total: ${seconds(usage.totals.workerSeconds)} worker-seconds, ${seconds(usage.totals.gpuSeconds)} GPU-seconds${byType ? ` (${byType})` : ""}, ${usage.totals.jobs} jobs` +
            (usage.totals.requests > 0 ? `, ${usage.totals.requests} load-balanced requests` : ""),
        ].join("\n");
      });
    });
}

/** The names of the endpoints the key can list, by id (none when it may not list them). */
async function endpointNames(): Promise<Map<string, string>> {
  try {
    const list = await management<Array<{ id: string; name: string }>>("GET", "/v1/endpoints");
    return new Map(list.map((e) => [e.id, e.name]));
  } catch {
    // A key without the management scope still reads its usage: ids then.
    return new Map();
  }
}
