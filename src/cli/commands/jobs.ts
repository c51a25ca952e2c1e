// `svc jobs list|status|cancel|retry <endpoint> [job]`: an endpoint's jobs from the terminal.

import type { Command } from "commander";
import { readJson } from "svc/internal";
import { intFlag, table } from "../management.js";
import { createOutput } from "../output.js";
import { apiFetch, resolveEndpointRef, serviceTarget } from "../target.js";
import { failureText, jobClient, renderOutput } from "./run.js";

interface JobSummary {
  id: string;
  status: string;
  createdAt: number;
  delayTime: number;
  executionTime: number;
  function: string | null;
  error?: string;
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
    .option("--limit <n>", "how many (1-500, default 20)", intFlag("--limit"), 20)
    .action(async (endpoint: string, o: Where & { limit: number }) => {
      const target = serviceTarget(o);
      const ref = await resolveEndpointRef(target, endpoint);
      const body = await readJson<{ jobs: JobSummary[] }>(await apiFetch(target, `/v2/${ref.id}/jobs?limit=${o.limit}`));
      createOutput(o).result(body.jobs, () =>
        table(
          body.jobs.map((j) => ({ ...j, createdAt: new Date(j.createdAt).toISOString(), delay: `${j.delayTime} ms`, execution: `${j.executionTime} ms`, error: j.error ?? "" })),
          ["id", "status", "function", "createdAt", "delay", "execution", "error"],
        ),
      );
    });
  withTarget(jobs.command("status").description("One job's record, with its output"))
    .argument("<endpoint>", "endpoint name or id")
    .argument("<job>", "job id")
    .action(async (endpoint: string, id: string, o: Where) => {
      const { client } = await jobClient(endpoint, o);
      const record = await client.status(id);
      createOutput(o).result(record, () => {
        const head = `${record.id} ${record.status} (waited ${record.delayTime ?? 0} ms, ran ${record.executionTime ?? 0} ms)`;
        if (record.status === "COMPLETED") return `${head}\n${renderOutput(record.output)}`;
        return record.error ? failureText(record) : head;
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
