// `svc dev`: build, run the service with process workers, deploy as environment "dev", watch and redeploy.
import type { Command } from "commander";
import { resolve } from "node:path";
import type { DevEvent, DevSessionHandle } from "../../dev/session.js";
import type { WorkerLogLine } from "../../drivers/types.js";
import { createOutput, endpointTable, styles as pc } from "../output.js";
import { envSetting, JobsClient } from "svc/internal";
import { failedJobStack } from "../../dev/failure-stack.js";
import { errorMessage, UsageError, UserError } from "../../errors.js";

const PALETTE = [pc.cyan, pc.magenta, pc.yellow, pc.green, pc.blue];

/** A worker's line in the dev terminal: `[endpoint job] text`, the endpoint in a colour of its own on a TTY. Pure. */
export function workerLine(endpoint: string, line: WorkerLogLine, color: boolean): string {
  const tag = `[${endpoint}${line.jobId ? ` ${line.jobId}` : ""}]`;
  if (!color) return `${tag} ${line.text}`;
  let hash = 0;
  for (const ch of endpoint) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  const paint = PALETTE[hash % PALETTE.length]!;
  return `${paint(tag)} ${line.stream === "stderr" ? pc.red(line.text) : line.stream === "log" ? pc.dim(line.text) : line.text}`;
}

/**
 * A failed job's stack under its line, once the job is final (src/dev/failure-stack.ts); printed once for a job
 * however many of its attempts failed (`waiting` holds the jobs whose record is awaited).
 */
async function printStack(session: DevSessionHandle, endpoint: string, jobId: string, waiting: Set<string>): Promise<void> {
  const id = session.endpoints.find((e) => e.name === endpoint)?.id;
  if (!id || waiting.has(jobId)) return;
  waiting.add(jobId);
  try {
    for (const line of await failedJobStack(new JobsClient(`${session.url}/v2/${id}`, session.apiKey, { quiet: true }), jobId))
      process.stderr.write(`[${endpoint} ${jobId}] ${line}\n`);
  } catch {
    // The session is stopping, or the job is gone: the failure line above is what there is.
  } finally {
    waiting.delete(jobId);
  }
}

/**
 * The runtime's notes about a worker's own life (draining at an idle scale-down, exiting, registering again,
 * serving its routes): shown under --verbose only. Notes about jobs (a failure, a timeout, a stray exception) are
 * always shown. Pure.
 */
export function isLifecycleNote(line: WorkerLogLine): boolean {
  if (line.stream !== "log" || line.jobId) return false;
  // A driver-captured note keeps the runtime's "[svc-runtime] " tag; one shipped over the protocol has none.
  return /^(\[svc-runtime\] )?(draining \(|drained; exiting|exiting: |handing back \d+ unfinished|the service does not know this worker|registering again|serving \d+ route\(s\)|pre-booted)/.test(
    line.text,
  );
}

/** A request as the dev terminal shows it: `POST /v2/<id>/runsync 200 12ms`. Pure. */
export function requestLine(r: { method: string; path: string; status: number; ms: number }): string {
  return `${r.method} ${r.path} ${r.status} ${Math.round(r.ms)}ms`;
}

/** `svc dev`'s pool size: --pool, else SVC_WORKER_POOL, else the dev default; 0 to 64. Pure. */
export function devPool(flag: string | undefined, fromEnv: string | undefined): number | undefined {
  const [raw, origin] = flag !== undefined ? [flag, "--pool"] : fromEnv !== undefined ? [fromEnv, "SVC_WORKER_POOL"] : [undefined, ""];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || n < 0 || n > 64) throw new UsageError(`${origin} must be a whole number from 0 to 64, not "${raw}"`);
  return n;
}

export function register(program: Command): void {
  program
    .command("dev")
    .description("Run the project locally behind the real job API; rebuild and replace workers on change")
    .option("-C, --dir <path>", "project directory", ".")
    .option("--port <n>", "port of the local service (default 8600, or the next free one when taken)")
    .option("--s3-port <n>", "the S3 API's own port, apart from the console (default: the service's port + 1; off: only under /s3)")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--exclude <packages>", "comma-separated packages to leave out of the artifact")
    .option("--no-watch", "do not rebuild on source changes")
    .option("--quiet", "do not print the workers' output (svc logs still has it)")
    .option("--retries <n>", "automatic retries of a failed job (default 0 in dev; deployed endpoints use their own)")
    .option("--pool <n>", "pre-booted worker runtimes kept ready for cold starts (default 1, or $SVC_WORKER_POOL; 0: none)")
    .option("--sandbox <mode>", "workers' sandbox: auto (bubblewrap where it works), bwrap (required) or none (or $SVC_SANDBOX; default auto)")
    .option("--no-request-log", "do not print a line per request to the job API and load-balanced routes")
    .option("--verbose", "also print the runtime's notes about workers' lives (draining, exiting, registering)")
    .option("--json", "print the session (URL, endpoints) as JSON on stdout once ready")
    .action(
      async (opts: {
        dir: string;
        port?: string;
        s3Port?: string;
        host: string;
        exclude?: string;
        watch: boolean;
        json?: boolean;
        quiet?: boolean;
        retries?: string;
        pool?: string;
        sandbox?: string;
        requestLog: boolean;
        verbose?: boolean;
      }) => {
        const out = createOutput({ json: opts.json });
        let port: number | undefined;
        if (opts.port !== undefined) {
          port = Number(opts.port);
          if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, not "${opts.port}"`);
        }
        let s3Port: number | null | undefined;
        if (opts.s3Port !== undefined) {
          s3Port = opts.s3Port === "off" ? null : Number(opts.s3Port);
          if (s3Port !== null && !(Number.isInteger(s3Port) && s3Port >= 0 && s3Port <= 65535))
            throw new UsageError(`--s3-port must be a port number or off, not "${opts.s3Port}"`);
        }
        const root = resolve(opts.dir);
        const retries = opts.retries === undefined ? undefined : Number(opts.retries);
        if (retries !== undefined && !(Number.isInteger(retries) && retries >= 0 && retries <= 10))
          throw new UsageError(`--retries must be 0 to 10, not "${opts.retries}"`);
        const pool = devPool(opts.pool, envSetting("SVC_WORKER_POOL"));
        if (opts.sandbox !== undefined && !["auto", "bwrap", "none"].includes(opts.sandbox))
          throw new UsageError(`--sandbox must be auto, bwrap or none, not "${opts.sandbox}"`);
        const userKey = envSetting("SVC_API_KEY");
        const { localEndpoints } = await import("../../deploy/access.js");
        const keyShown = () => (userKey ? "$SVC_API_KEY" : session!.apiKey);
        // Once a stop is asked for (Ctrl-C reaches the workers too), workers ending is what was asked: not news.
        let stopping = false;
        const paint = (style: (s: string) => string, text: string) => (out.color ? style(text) : text);
        const stacksAwaited = new Set<string>();
        const onEvent = (event: DevEvent) => {
          switch (event.type) {
            case "rebuilding":
              out.info(`change in ${event.changed.join(", ")}: rebuilding...`);
              break;
            case "rebuild-failed":
              // Not out.warn (once per distinct text): the same broken save made again must be answered again.
              out.info(
                `${paint(pc.yellow, "warning")}: rebuild failed, the previous build keeps serving:\n${event.error instanceof UserError ? [event.error.message, ...event.error.problems.map((p) => `  - ${p}`)].join("\n") : errorMessage(event.error)}`,
              );
              break;
            case "port-fallback":
              out.info(`port ${event.requested} is in use; listening on ${event.port} instead`);
              break;
            case "image-unavailable":
              out.info(`${paint(pc.yellow, "warning")}: ${event.error.message}\n  ${event.error.hint ?? ""}`);
              break;
            case "deployed": {
              if (!session) break;
              out.info(redeployedLine(event));
              for (const name of event.removed) out.info(`endpoint ${name} is gone from the project: removed`);
              const added = localEndpoints(
                event.endpoints.filter((e) => event.added.includes(e.name)),
                session.build.manifest,
                session.url,
                keyShown(),
              );
              if (added.length > 0) out.info(`new endpoint(s):\n${endpointTable(added)}`);
              break;
            }
            case "request":
              out.info(requestLine(event));
              break;
            case "worker-log":
              if (opts.quiet) break;
              if (!opts.verbose && isLifecycleNote(event.line)) break;
              if (stopping && !event.line.jobId && /^worker exited unexpectedly /.test(event.line.text)) break;
              // A worker that cannot start is a failed release: said once, with its stack, as a rebuild failure.
              if (/worker failed to start: /.test(event.line.text)) break;
              out.info(workerLine(event.endpoint, event.line, out.color));
              // A failed job: its stack below the line, the project's frames first-class (they are what to open).
              if (session && event.line.jobId && /\bjob \S+ failed: /.test(event.line.text))
                void printStack(session, event.endpoint, event.line.jobId, stacksAwaited);
              break;
          }
        };
        // Loaded lazily: the service and the build stay out of the start-up of other commands.
        const { startDevSession } = await import("../../dev/session.js");
        const { parseServiceSettings, settingsEnvironment } = await import("../../service/config.js");

        let session: DevSessionHandle | undefined;
        session = await out.step("Building and starting the local service", () =>
          startDevSession({
            root,
            port,
            s3Port,
            retries,
            pool,
            host: opts.host,
            watch: opts.watch,
            exclude: opts.exclude
              ?.split(",")
              .map((s) => s.trim())
              .filter(Boolean),
            onEvent,
            settings: parseServiceSettings(settingsEnvironment(envSetting)),
            sandbox: opts.sandbox as "auto" | "bwrap" | "none" | undefined,
            requestLog: opts.requestLog,
          }),
        );
        const s = session;
        // Load-balanced endpoints are reached at their own address ({service}/lb/{id}), not the job API's.
        const endpoints = localEndpoints(s.endpoints, s.build.manifest, s.url, keyShown());
        const s3Url = s.service.s3?.url;
        out.result({ url: s.url, console: `${s.url}/console/`, s3: s3Url, app: s.app, env: "dev", apiKey: userKey ? undefined : s.apiKey, endpoints }, () =>
          [
            `svc dev: ${s.url}  (app ${s.app}, environment dev)`,
            `web console: ${s.url}/console/`,
            ...(s3Url ? [`S3 API (volumes): ${s3Url}`] : []),
            `workers: ${s.isolation}`,
            ...(userKey ? [] : [`API key for this session: ${s.apiKey}`]),
            "",
            endpointTable(endpoints),
          ].join("\n"),
        );
        out.info(opts.watch ? "Watching for changes. Press Ctrl-C to stop." : "Press Ctrl-C to stop.");
        await new Promise<void>((done) => {
          process.once("SIGINT", done);
          process.once("SIGTERM", done);
        });
        stopping = true;
        out.info("stopping...");
        await s.close();
      },
    );
}

/** What a redeploy changed, in one line: who gets new workers, who keeps theirs. Pure. */
export function redeployedLine(event: { endpoints: ReadonlyArray<{ name: string }>; added: readonly string[]; changed: readonly string[] }): string {
  const kept = event.endpoints.map((e) => e.name).filter((n) => !event.changed.includes(n) && !event.added.includes(n));
  const replaced =
    event.changed.length > 0 ? `new workers for ${event.changed.join(", ")} (code or settings changed)` : "no endpoint's code or settings changed";
  return `redeployed: ${replaced}${kept.length > 0 ? `; ${kept.join(", ")} keep${kept.length === 1 ? "s" : ""} ${kept.length === 1 ? "its" : "their"} workers` : ""}; queued jobs are kept`;
}
