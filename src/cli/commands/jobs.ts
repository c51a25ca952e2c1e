// `svc jobs list|status|cancel|retry <endpoint> [job]`: an endpoint's jobs from the terminal (`status`, also
// `get`, shows the job's webhook delivery log too).

import type { Command } from "commander";
import { ApiError } from "svc";
import { readJson } from "svc/internal";
import { intFlag, table } from "../management.js";
import { timeAgo } from "../duration.js";
import { createOutput } from "../output.js";
import { apiFetch, resolveEndpointRef, serviceTarget } from "../target.js";
import { failureText, jobClient, renderOutput } from "./run.js";
import { renderDeliveryLog, type DeliveryLog } from "../webhook-log.js";

interface JobSummary {
  id: string;
  status: string;
  createdAt: number;
  delayTime: number;
  executionTime: number;
  function: string | null;
  error?: string;
  workerId?: string | null;
  attempts?: number;
  /** Its result expired: a history record (GET /v2/{id}/jobs/{job}). */
  resultExpired?: true;
  resultExpiredAt?: number;
  keptUntil?: number;
}

type Where = { app?: string; env?: string; json?: boolean };

function withTarget(cmd: Command): Command {
  return cmd
    .option("--app <name>", "app (default: the dev session, SVC_APP)")
    .option("--env <name>", "environment (default: the dev session, SVC_ENV)")
    .option("--json", "print JSON");
}

export function register(program: Command): void {
  const jobs = program.command("jobs").description("List, inspect, cancel and retry an endpoint's jobs");
  withTarget(jobs.command("list").description("The endpoint's recent jobs, newest first"))
    .argument("<endpoint>", "endpoint name or id")
    .option("--limit <n>", "how many (1-500)", intFlag("--limit"), 20)
    .action(async (endpoint: string, o: Where & { limit: number }) => {
      const target = serviceTarget(o);
      const ref = await resolveEndpointRef(target, endpoint);
      const body = await readJson<{ jobs: JobSummary[] }>(await apiFetch(target, `/v2/${ref.id}/jobs?limit=${o.limit}`));
      const now = Date.now();
      // (Times relative here, exact under --json; the function only where a job names one: a class endpoint's.)
      const named = body.jobs.some((j) => j.function);
      createOutput(o).result(body.jobs, () =>
        table(
          body.jobs.map((j) => ({
            ...j,
            created: timeAgo(j.createdAt, now),
            delay: `${j.delayTime} ms`,
            execution: `${j.executionTime} ms`,
            status: j.resultExpired ? `${j.status} (result expired)` : j.status,
            error: j.error ?? "",
          })),
          ["id", "status", ...(named ? ["function"] : []), "created", "delay", "execution", "error"],
        ),
      );
    });
  withTarget(jobs.command("status").alias("get").description("One job's record, with its output and its webhook deliveries"))
    .argument("<endpoint>", "endpoint name or id")
    .argument("<job>", "job id")
    .action(async (endpoint: string, id: string, o: Where) => {
      const { client, ref } = await jobClient(endpoint, o);
      const target = serviceTarget(o);
      let record: Awaited<ReturnType<typeof client.status>>;
      try {
        record = await client.status(id);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        // No result any more: the job's history record, when it is kept (else the job API's 404 stands).
        const kept = await apiFetch(target, `/v2/${encodeURIComponent(ref.id)}/jobs/${encodeURIComponent(id)}`);
        if (kept.status !== 200) {
          await kept.arrayBuffer();
          throw err;
        }
        const history = await readJson<JobSummary>(kept);
        const now = Date.now();
        createOutput(o).result(history, () =>
          [
            `${history.id} ${history.status} (waited ${history.delayTime} ms, ran ${history.executionTime} ms; ${history.attempts ?? 1} attempt(s), worker ${history.workerId ?? "-"})`,
            ...(history.error ? [`error: ${history.error}`] : []),
            `its result expired ${timeAgo(history.resultExpiredAt!, now)} (input, output and stream are no longer kept); this record is kept until ${new Date(history.keptUntil!).toISOString()}`,
          ].join("\n"),
        );
        return;
      }
      const answer = await apiFetch(target, `/v2/${encodeURIComponent(ref.id)}/webhook-deliveries/${encodeURIComponent(id)}`);
      // A service from before delivery logs has no such route: the record alone is what it knows.
      const log = answer.status === 404 ? (await answer.arrayBuffer(), { jobId: id, deliveries: [], pending: [] }) : await readJson<DeliveryLog>(answer);
      // --json: the job record as the job API answers it, with svc's delivery log beside it.
      createOutput(o).result({ ...record, webhookDeliveries: log.deliveries, webhookPending: log.pending }, () => {
        const head = `${record.id} ${record.status} (waited ${record.delayTime ?? 0} ms, ran ${record.executionTime ?? 0} ms)`;
        const text = record.status === "COMPLETED" ? `${head}\n${renderOutput(record.output)}` : record.error ? failureText(record) : head;
        const deliveries = renderDeliveryLog(log);
        return deliveries ? `${text}\n\n${deliveries}` : text;
      });
    });
  withTarget(jobs.command("cancel").description("Cancel a queued or running job"))
    .argument("<endpoint>", "endpoint name or id")
    .argument("<job>", "job id")
    .action(async (endpoint: string, id: string, o: Where) => {
      const { client } = await jobClient(endpoint, o);
      const answer = await client.cancel(id);
      createOutput(o).result(answer, () => `${answer.id} ${answer.status}`);
    });
  withTarget(jobs.command("retry").description("Run a failed, cancelled or timed-out job again (same id)"))
    .argument("<endpoint>", "endpoint name or id")
    .argument("<job>", "job id")
    .action(async (endpoint: string, id: string, o: Where) => {
      const { client } = await jobClient(endpoint, o);
      const answer = await client.retry(id);
      createOutput(o).result(answer, () => `${answer.id} ${answer.status}`);
    });
}
