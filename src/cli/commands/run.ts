// `svc run <endpoint> [input]`: submit a job and print its output; streamed chunks are printed as they arrive, and
// the progress its handler reports (ctx.progress) is shown on stderr while it runs.
// Exit codes: 0 the job COMPLETED; 1 it ended FAILED, CANCELLED or TIMED_OUT (its error on stderr), or did not end
// within --wait; 3/4 as for every command (the service refused, or could not be reached).

import { Option, type Command } from "commander";
import { ExitCode, UserError } from "../../errors.js";
import { FINAL_STATUSES, JobsClient, type JobRecord } from "svc/internal";
import { durationFlag } from "../duration.js";
import { readAllStdin, readJobInput } from "../job-input.js";
import { createOutput } from "../output.js";
import { ProgressLine } from "../progress-line.js";
import { resolveEndpointRef, serviceTarget } from "../target.js";

/** What a person reads of an output: text as it is, anything else as JSON. Pure. */
export function renderOutput(value: unknown, pretty = true): string {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, pretty ? 2 : undefined) ?? "null";
}

/** The stderr block for a job that did not complete. Pure. */
export function failureText(record: JobRecord): string {
  const lines = [`job ${record.id} ${record.status}${record.error ? `: ${record.error}` : ""}`];
  if (typeof record.errorStack === "string") lines.push(record.errorStack);
  return lines.join("\n");
}

export async function jobClient(endpoint: string, opts: { app?: string; env?: string }) {
  const target = serviceTarget(opts);
  const ref = await resolveEndpointRef(target, endpoint);
  return { ref, client: new JobsClient(ref.url, target.apiKey) };
}

export function register(program: Command): void {
  program
    .command("run")
    .description("Run a job on an endpoint and print its output (streamed chunks as they arrive)")
    .argument("<endpoint>", "endpoint name (in the project's app/environment or the dev session) or id")
    .argument("[input]", "the job's input: JSON, @file.json, or - for standard input (default {})")
    .option("--function <name>", "the function to run, for an endpoint that serves several (a class endpoint)")
    .option("--async", "print the job id and return at once")
    .addOption(new Option("--wait <duration>", "how long to wait for the result").argParser(durationFlag("--wait", "ms")).default(3_600_000, "1h"))
    .option("--ttl <duration>", "how long the job may live from submission, queued and running (e.g. 10m; default 24h): then it ends TIMED_OUT. Its result is kept 30 min after it ends", durationFlag("--ttl", "ms"))
    .option("--timeout <duration>", "the job's execution timeout (e.g. 5m)", durationFlag("--timeout", "ms"))
    .option("--app <name>", "app (default: the dev session, SVC_APP)")
    .option("--env <name>", "environment (default: the dev session, SVC_ENV)")
    .option("--json", "print the final job record (or {id, status} with --async) as JSON")
    .action(
      async (
        endpoint: string,
        inputArg: string | undefined,
        o: { function?: string; async?: boolean; wait: number; ttl?: number; timeout?: number; app?: string; env?: string; json?: boolean },
      ) => {
        const out = createOutput({ json: o.json });
        const input = await readJobInput(inputArg, readAllStdin);
        const { ref, client } = await jobClient(endpoint, o);
        const policy = o.ttl === undefined && o.timeout === undefined ? undefined : { ttl: o.ttl, executionTimeout: o.timeout };
        const submitted = await client.run(input, { function: o.function, policy });
        if (o.async) {
          out.result(submitted, () => submitted.id);
          return;
        }
        out.info(`job ${submitted.id} on ${ref.name}`);
        const deadline = Date.now() + o.wait;
        let streamed = 0;
        let atLineStart = true;
        let status = submitted.status;
        const progress = o.json ? undefined : new ProgressLine(process.stderr);
        // /stream waits for new chunks (or the end) itself: this loop does not spin.
        while (!FINAL_STATUSES.includes(status) && Date.now() < deadline) {
          const part = await client.stream(submitted.id);
          status = part.status;
          for (const chunk of part.stream) {
            streamed++;
            if (o.json) continue;
            const text = typeof chunk.output === "string" ? chunk.output : `${renderOutput(chunk.output, false)}\n`;
            progress?.clear();
            process.stdout.write(text);
            if (text.length > 0) atLineStart = text.endsWith("\n");
          }
          // While it runs, a job's record carries its latest progress as its output.
          if (progress && status === "IN_PROGRESS") {
            const now = await client.status(submitted.id);
            if (now.status === "IN_PROGRESS" && now.output !== undefined) progress.show(now.output);
          }
        }
        progress?.clear();
        const record = await client.status(submitted.id);
        if (!FINAL_STATUSES.includes(record.status)) {
          throw new UserError(`Job ${record.id} is still ${record.status} after ${Math.round(o.wait / 1000)} s`, {
            hint: `It keeps running: \`svc jobs status ${endpoint} ${record.id}\` shows it later, \`svc jobs cancel ${endpoint} ${record.id}\` stops it.`,
          });
        }
        if (o.json) process.stdout.write(`${JSON.stringify(record, null, 2)}\n`);
        else if (streamed > 0) {
          // Text chunks need not end in a newline: end the line so the shell's prompt starts on its own.
          if (!atLineStart) process.stdout.write("\n");
        } else if (record.status === "COMPLETED") process.stdout.write(`${renderOutput(record.output)}\n`);
        if (record.status !== "COMPLETED") {
          process.stderr.write(`${failureText(record)}\n`);
          process.exitCode = ExitCode.user;
        }
      },
    );
}
