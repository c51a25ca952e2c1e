// `svc logs <endpoint> [--job <id>] [--follow]`: worker output kept by the service, per endpoint and per job.
import type { Command } from "commander";
import { apiFetch, resolveEndpointRef, serviceTarget } from "../target.js";
import { readJson } from "svc/internal";
import { createOutput } from "../output.js";
import { parseSince } from "../duration.js";

export interface LogLine {
  ts: number;
  workerId: string;
  jobId?: string | null;
  stream: string;
  text: string;
  /** On the service's notice of lines the log quotas dropped (stream "dropped"): how many. */
  dropped?: number;
}

/** stderr lines are marked `!`, the service's notice of dropped lines `!!` (it stands for lines that are not there). */
export function formatLogLine(line: LogLine): string {
  const job = line.jobId ? ` ${line.jobId}` : "";
  const mark = line.stream === "dropped" ? "!! " : line.stream === "stderr" ? "! " : "";
  return `${new Date(line.ts).toISOString()} ${line.workerId}${job} ${mark}${line.text}`;
}

export function register(program: Command): void {
  program
    .command("logs")
    .description("Show worker logs of an endpoint (name in the current app/environment, or id)")
    .argument("<endpoint>", "endpoint name or id")
    .option("--job <id>", "only the lines of this job")
    .option("-f, --follow", "keep printing new lines until interrupted")
    .option("--since <when>", "only newer lines: a duration back from now (10m, 2h, 1d), an ISO time, or epoch ms", (v: string) => String(parseSince(v)))
    .option("--app <name>", "app (default: the dev session, SVC_APP)")
    .option("--env <name>", "environment (default: the dev session, SVC_ENV)")
    .option("--json", "print lines as JSON (one object per line)")
    .action(async (endpoint: string, opts: { job?: string; follow?: boolean; since?: string; app?: string; env?: string; json?: boolean }) => {
      const out = createOutput({ json: opts.json });
      const target = serviceTarget({ app: opts.app, env: opts.env });
      const ref = await resolveEndpointRef(target, endpoint);
      const query = new URLSearchParams();
      if (opts.job) query.set("job", opts.job);
      if (opts.since) query.set("since", opts.since);
      const print = (line: LogLine) => process.stdout.write(`${opts.json ? JSON.stringify(line) : formatLogLine(line)}\n`);
      if (!opts.follow) {
        const body = await readJson<{ lines: LogLine[]; dropped?: number }>(await apiFetch(target, `/v1/endpoints/${ref.id}/logs?${query}`));
        for (const line of body.lines) print(line);
        if (body.lines.length === 0 && !out.json) out.info(`no log lines for ${ref.name}${opts.job ? ` job ${opts.job}` : ""}`);
        if (body.dropped && !out.json)
          out.warn(
            `${body.dropped} log line${body.dropped === 1 ? " was" : "s were"} dropped by the service's log quotas (the lines marked !! say where and which limit)`,
          );
        return;
      }
      query.set("follow", "1");
      const controller = new AbortController();
      const stop = () => controller.abort();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      try {
        const response = await apiFetch(target, `/v1/endpoints/${ref.id}/logs?${query}`, { signal: controller.signal });
        if (!response.ok) await readJson(response);
        let buffered = "";
        const decoder = new TextDecoder();
        for await (const chunk of response.body!) {
          buffered += decoder.decode(chunk as Uint8Array, { stream: true });
          let nl: number;
          while ((nl = buffered.indexOf("\n")) >= 0) {
            const raw = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (raw) print(JSON.parse(raw) as LogLine);
          }
        }
      } catch (err) {
        if (!controller.signal.aborted) throw err;
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    });
}
