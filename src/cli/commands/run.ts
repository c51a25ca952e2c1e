// `svc run <endpoint> [input]`: submit a job and print its output; streamed chunks are printed as they arrive, and
// the progress its handler reports (ctx.progress) is shown on stderr while it runs.
// Exit codes: 0 the job COMPLETED; 1 it ended FAILED, CANCELLED or TIMED_OUT (its error on stderr), or did not end
// within --wait; 3/4 as for every command (the service refused, or could not be reached).
// `--timeout` is kept by the CLI too: a running job the service has not ended by then (plus TIMEOUT_GRACE_MS) is
// reported TIMED_OUT and cancelled, so a service that does not answer cannot keep `svc run` waiting past it.

import { Option, type Command } from "commander";
import { errorMessage, ExitCode, UserError } from "../../errors.js";
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

/** A duration as --timeout takes it back: "5 s", "1.5 s", "250 ms". Pure. */
function formatSeconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
}

/** The stderr block for a job that did not complete. Pure. */
export function failureText(record: JobRecord): string {
  const lines = [`job ${record.id} ${record.status}${record.error ? `: ${record.error}` : ""}`];
  if (typeof record.errorStack === "string") lines.push(record.errorStack);
  return lines.join("\n");
}

/**
 * How long past a running job's execution timeout `svc run` still waits for the service to end it: one /stream
 * long-poll (1.5 s) for the final status to arrive plus the service's periodic check (at most 250 ms), rounded up.
 * A service that enforces the timeout is therefore always the one that reports it; the CLI steps in only when it
 * has not (it does not answer, or it does not enforce the timeout).
 */
export const TIMEOUT_GRACE_MS = 2_000;
/** How long the cancel of a job `svc run` gave up on may take before the CLI exits without its answer. */
export const TIMEOUT_CANCEL_WAIT_MS = 5_000;

/**
 * When `svc run` stops waiting: --wait after submission, or, once the job was seen running, its execution
 * timeout plus TIMEOUT_GRACE_MS after that (the timeout counts from the job's start, as the service's does: time
 * in the queue is the ttl's). `seenRunningAt` is the CLI's own clock, so no clock skew with the service matters;
 * it is at or after the real start, so the CLI never gives up before the service would. Pure.
 */
export function waitDeadline(o: { submittedAt: number; waitMs: number; timeoutMs?: number; seenRunningAt?: number }): {
  at: number;
  reason: "wait" | "timeout";
} {
  const wait = o.submittedAt + o.waitMs;
  if (o.timeoutMs === undefined || o.seenRunningAt === undefined) return { at: wait, reason: "wait" };
  const timeout = o.seenRunningAt + o.timeoutMs + TIMEOUT_GRACE_MS;
  return timeout < wait ? { at: timeout, reason: "timeout" } : { at: wait, reason: "wait" };
}

/** The request's answer, or undefined when `ms` passed first (the request is then left to end unheard). */
async function within<T>(request: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, ms))));
  try {
    return await Promise.race([request, late]);
  } finally {
    clearTimeout(timer);
    // Past the deadline nobody reads its answer; its failure (the service went away) must not crash the CLI, and
    // the caller has already said what it does about the missing answer.
    request.catch(() => undefined /* the deadline's outcome is the one reported */);
  }
}

/** The outcome of cancelling a job the CLI gave up on, as its stderr line says it. */
async function cancelAfterTimeout(client: JobsClient, id: string, again: string): Promise<{ line: string; cancel: { status: string } | { error: string } }> {
  try {
    const answer = await within(client.cancel(id), TIMEOUT_CANCEL_WAIT_MS);
    if (!answer) return { line: `the service did not answer the cancel within ${TIMEOUT_CANCEL_WAIT_MS / 1000} s; ${again}`, cancel: { error: "no answer" } };
    return { line: answer.status === "CANCELLED" ? "cancelled on the service" : `the service reports it ${answer.status}`, cancel: { status: answer.status } };
  } catch (err) {
    // Refused because the service ended the job meanwhile (its own timeout, once it ran again): say so.
    // Read only to tell a refusal because the job already ended from any other; when this read fails too, the
    // line below reports the cancel's own error, which is what the user acts on.
    const record = await within(client.status(id), TIMEOUT_CANCEL_WAIT_MS).catch(() => undefined /* the cancel's error is reported */);
    if (record && FINAL_STATUSES.includes(record.status)) return { line: `the service has ended it: ${record.status}`, cancel: { status: record.status } };
    return { line: `could not cancel it: ${errorMessage(err)}; ${again}`, cancel: { error: errorMessage(err) } };
  }
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
    .option(
      "--ttl <duration>",
      "how long the job may live from submission, queued and running (e.g. 10m; default 24h): then it ends TIMED_OUT. Its result is kept 30 min after it ends",
      durationFlag("--ttl", "ms"),
    )
    .option(
      "--timeout <duration>",
      "the job's execution timeout, from its start (e.g. 5m); the CLI also stops waiting 2 s after it, reports the job TIMED_OUT and cancels it",
      durationFlag("--timeout", "ms"),
    )
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
        const submittedAt = Date.now();
        let seenRunningAt = submitted.status === "IN_PROGRESS" ? submittedAt : undefined;
        const deadline = () => waitDeadline({ submittedAt, waitMs: o.wait, timeoutMs: o.timeout, seenRunningAt });
        let streamed = 0;
        let atLineStart = true;
        let status = submitted.status;
        const progress = o.json ? undefined : new ProgressLine(process.stderr);
        // /stream waits for new chunks (or the end) itself: this loop does not spin. No request outlives the
        // deadline: a service that does not answer must not keep the CLI waiting past it.
        while (!FINAL_STATUSES.includes(status) && Date.now() < deadline().at) {
          const part = await within(client.stream(submitted.id), deadline().at - Date.now());
          if (!part) break;
          status = part.status;
          if (status === "IN_PROGRESS") seenRunningAt ??= Date.now();
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
            const now = await within(client.status(submitted.id), deadline().at - Date.now());
            if (now?.status === "IN_PROGRESS" && now.output !== undefined) progress.show(now.output);
          }
        }
        progress?.clear();
        if (!FINAL_STATUSES.includes(status) && deadline().reason === "timeout") {
          // The service has not ended it: the CLI keeps the timeout itself, as the service would have.
          const error = `no result within its execution timeout of ${formatSeconds(o.timeout!)} (and ${TIMEOUT_GRACE_MS / 1000} s of grace)`;
          // Said before the cancel, which waits on the service that has not answered so far.
          process.stderr.write(`job ${submitted.id} TIMED_OUT: ${error}; cancelling it\n`);
          const cancelled = await cancelAfterTimeout(client, submitted.id, `\`svc jobs cancel ${endpoint} ${submitted.id}\` stops it`);
          process.stderr.write(`job ${submitted.id}: ${cancelled.line}\n`);
          if (o.json) process.stdout.write(`${JSON.stringify({ id: submitted.id, status: "TIMED_OUT", error, cancel: cancelled.cancel }, null, 2)}\n`);
          process.exitCode = ExitCode.user;
          return;
        }
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
