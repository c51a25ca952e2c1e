// The worker process: `node dist/runtime/worker.js`, started by a driver with the environment of
// docs/worker-protocol.md. Like bin/svc.js this is a process entry: it alone decides the exit code.
//
//   0  drained (the service asked, or SIGTERM) or orphaned cleanly
//   1  could not start: bad environment, artifact refused, handler failed to load or init

import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorMessage, UserError } from "../errors.js";
import { type LoadedHandler, processAlive } from "svc/internal";
import { extractArtifactCached } from "../artifact/extract.js";
import { WorkerApi } from "./api.js";
import { readWorkerEnv, type WorkerSettings } from "./env.js";
import { handlerPath, importHandler, installRuntimeContext } from "./handler.js";
import { captureProcessOutput, jobScope, LogShipper } from "./logs.js";
import { WorkerLoop } from "./loop.js";
import { noteMark } from "./output-marks.js";
import { isLoadBalancedEndpoint, serveRoutes, type RouteServer } from "./lb.js";
import { projectRelativeStack } from "../build/source-paths.js";
import { restoredFromSnapshot } from "./snapshot.js";
import { claimFromStdin, POOL_CHANNEL_ENV } from "./claim.js";
import { warmUp } from "./warm-up.js";
import { lbCredentialOfToken } from "../lb-credential.js";
import { SpanExporter, spanTarget } from "./spans.js";

// A driver reads stdout/stderr through pipes. Once its end is gone (the service died), every write fails with
// EPIPE, reported as an 'error' event: unhandled, that was an uncaught exception whose note wrote to stderr
// again, a loop that kept an orphaned worker at 100% CPU. Output nobody reads is dropped instead.
let stderrGone = false;
process.stdout.on("error", () => undefined);
process.stderr.on("error", () => {
  stderrGone = true;
});
const rawStderrWrite = process.stderr.write.bind(process.stderr);
const writeStderr = (text: string) => {
  if (!stderrGone) rawStderrWrite(text);
};

async function prepareArtifact(settings: WorkerSettings): Promise<string> {
  if (settings.artifactDir) return settings.artifactDir;
  const cache = settings.artifactCacheDir ?? join(tmpdir(), "svc-artifact-cache");
  return extractArtifactCached(settings.artifact!, cache, { token: settings.workerToken });
}

/** What a load-balanced worker registers: its address, and the local socket it also serves on (SVC_LB_SOCKET). */
function routeAddress(server: RouteServer): { address: string; socket?: string } {
  return server.socket === undefined ? { address: server.address } : { address: server.address, socket: server.socket };
}

/** `preloaded`: the handler a snapshot's template initialised before this worker was restored from it. */
async function main(preloaded?: LoadedHandler): Promise<number> {
  // Stacks of the user's code point at their TypeScript sources (the build writes source maps beside handlers).
  process.setSourceMapsEnabled(true);
  let settings: WorkerSettings;
  try {
    settings = readWorkerEnv(process.env);
  } catch (err) {
    const problems = err instanceof UserError ? err.problems.map((p) => `\n  - ${p}`).join("") : "";
    writeStderr(`[svc-runtime] ${errorMessage(err)}${problems}\n`);
    return 1;
  }
  const api = new WorkerApi(settings.apiUrl, settings.workerToken);
  const shipper = new LogShipper({
    post: (lines) => api.post("log", { workerId: settings.workerId, lines }).then(() => undefined),
  });
  // Under a driver, the driver captures this process's output: mark lines instead of shipping them twice.
  const marked = settings.outputCaptured;
  const note = (text: string) => {
    writeStderr(`${marked ? noteMark(jobScope.getStore()) : ""}[svc-runtime] ${text}\n`);
    if (!marked) shipper.add("log", text);
  };
  const restoreOutput = captureProcessOutput(shipper, { marked });
  // The runtime's span of each handler's run, where the service traces (it names its collector in the env).
  const spanTo = spanTarget(process.env);
  const spans = spanTo
    ? new SpanExporter(
        spanTo,
        {
          "service.name": process.env.OTEL_SERVICE_NAME || "svc-worker",
          "service.instance.id": settings.workerId,
          "svc.worker.id": settings.workerId,
          "svc.endpoint.id": settings.endpointId,
          "svc.endpoint.name": settings.endpointName,
          ...(settings.app ? { "svc.app": settings.app } : {}),
          ...(settings.env ? { "svc.env": settings.env } : {}),
        },
        note,
      )
    : undefined;

  let handler: LoadedHandler | undefined;
  let routeServer: RouteServer | undefined;
  let loop: WorkerLoop | undefined;
  installRuntimeContext(
    {
      endpointName: settings.endpointName,
      endpointId: settings.endpointId,
      app: settings.app,
      env: settings.env,
      apiUrl: settings.apiUrl,
      apiKey: settings.apiKey,
    },
    () => handler,
    (jobId) => loop?.signalOf(jobId),
    (jobId) => loop?.progressOf(jobId),
  );

  let stopRequested: string | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    stopRequested = signal;
    if (loop) loop.stop(signal, settings.stopGraceMs);
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  // One job's stray rejection or throw (a callback it did not await) must not take down the other jobs this
  // worker runs: report it, attributed to its job where the context survived, and keep serving.
  process.on("unhandledRejection", (reason) => note(`unhandled rejection: ${describe(reason)}`));
  process.on("uncaughtException", (err) => note(`uncaught exception: ${describe(err)}`));

  try {
    const dir = await prepareArtifact(settings);
    // A load-balanced worker listens (and registers its address) before it loads the handler, so the
    // service sees /ping answer 204 while it initializes and 200 once it is ready.
    // Every request must carry the credential the service derives from this worker's token (docs/lb.md): any
    // other process that can reach the port (another tenant's worker) is refused.
    const routeOptions = {
      host: settings.httpHost,
      port: settings.httpPort,
      socketPath: settings.lbSocket,
      credential: lbCredentialOfToken(settings.workerToken),
    };
    if (!preloaded && (await isLoadBalancedEndpoint(dir, settings.endpointName))) {
      routeServer = await serveRoutes(null, routeOptions);
      const early = { workerId: settings.workerId, concurrency: settings.maxConcurrency, ...routeAddress(routeServer) };
      await api
        .post("register", early, { timeoutMs: 5000 })
        .catch(() => undefined /* early only to show /ping 204 sooner: the loop registers once the handler is loaded */);
    }
    let loaded = preloaded;
    if (!loaded) {
      loaded = await importHandler(await handlerPath(dir, settings.endpointName));
      await loaded.init();
    }
    if (loaded.kind === "lb") {
      routeServer ??= await serveRoutes(null, routeOptions);
      routeServer.ready(loaded.routes);
      // In a container (listening on every interface) the address inside it is not where anyone reaches it.
      const where =
        settings.httpHost === "0.0.0.0" || settings.httpHost === "::"
          ? `on port ${new URL(routeServer.address).port} of this container`
          : `at ${routeServer.address}`;
      note(`serving ${loaded.routes.length} route(s) and /ping ${where}`);
    }
    handler = loaded;
  } catch (err) {
    note(`worker failed to start: ${errorMessage(err)}`);
    await api
      .post("fail-start", { workerId: settings.workerId, error: startFailureDetail(err) }, { timeoutMs: 5000 })
      .catch(() => undefined /* exiting either way: the service also learns it from the exit */);
    await routeServer?.close();
    await shipper.flush();
    restoreOutput();
    api.close();
    return 1;
  }

  const parentPid = settings.parentPid;
  loop = new WorkerLoop({
    api,
    handler,
    workerId: settings.workerId,
    concurrency: settings.maxConcurrency,
    note,
    stopGraceMs: settings.stopGraceMs,
    takeJobs: handler.kind !== "lb",
    spans,
    registerExtra: { ...(routeServer ? routeAddress(routeServer) : {}), ...(settings.revision ? { revision: settings.revision } : {}) },
    isOrphaned: parentPid
      ? (unreachableMs) => unreachableMs > settings.orphanExitMs && (process.ppid !== parentPid || !processAlive(parentPid))
      : settings.orphanWhenUnreachable
        ? (unreachableMs) => unreachableMs > settings.orphanExitMs
        : undefined,
  });
  if (stopRequested) loop.stop(stopRequested, settings.stopGraceMs);
  const outcome = await loop.run();
  await routeServer?.close();
  note(outcome === "orphaned" ? "exiting: orphaned" : outcome === "refused" ? "exiting: the service refuses this worker" : "drained; exiting");
  await spans?.flush();
  if (outcome !== "orphaned") await shipper.flush();
  shipper.stop();
  restoreOutput();
  api.close();
  return outcome === "refused" ? 1 : 0;
}

/**
 * What a worker that cannot start tells the service: the message, and the stack of what threw (the user's code,
 * as project-relative TypeScript paths through the source maps), so a failed release names the file and line.
 */
function startFailureDetail(err: unknown): string {
  const thrown = err instanceof UserError && err.cause instanceof Error ? err.cause : err;
  if (!(thrown instanceof Error) || !thrown.stack || (thrown === err && err instanceof UserError)) return errorMessage(err);
  // The frames of the user's code and its packages; node's module loader and svc's runtime say nothing useful.
  const frames = projectRelativeStack(thrown.stack)
    .split("\n")
    .filter((line) => /^\s+at /.test(line) && !/\(node:internal|at node:internal|\/runtime\/(handler|worker)\.js/.test(line));
  return [`${thrown.name}: ${thrown.message}`, ...frames].join("\n");
}

function describe(value: unknown): string {
  const jobId = jobScope.getStore();
  const text = value instanceof Error ? (value.stack ?? value.message) : String(value);
  return jobId ? `(job ${jobId}) ${text}` : text;
}

/** What a driver hands a pre-booted runtime when it makes it a worker. */
export interface PoolClaim {
  env: Record<string, string>;
  cwd: string;
}

/**
 * A pre-booted runtime (SVC_POOLED=1, started by a driver with an IPC channel): Node and this runtime are loaded
 * already; it says so, waits for a driver to hand it a worker's environment and directory, and becomes that
 * worker (once: it never serves another). False when its driver went away first (nothing to become).
 */
async function claimed(): Promise<boolean> {
  if (process.env.SVC_POOLED === "1") await warmUp();
  // In a container: the claim comes on stdin (claim.ts).
  if (process.env.SVC_POOLED === "1" && process.env[POOL_CHANNEL_ENV] === "stdin") return claimFromStdin(writeStderr);
  if (process.env.SVC_POOLED !== "1" || !process.send) return true;
  return new Promise((resolve) => {
    process.once("disconnect", () => resolve(false));
    process.once("message", (claim: PoolClaim) => {
      // The worker's environment replaces the pool's: nothing of the pool's survives into the user's code.
      for (const key of Object.keys(process.env)) if (!Object.hasOwn(claim.env, key)) delete process.env[key];
      Object.assign(process.env, claim.env);
      process.chdir(claim.cwd);
      resolve(true);
      // From here the worker talks to the service; an open channel would keep it alive past its drain.
      process.disconnect();
    });
    process.send!({ ready: true });
  });
}

claimed()
  .then(async (claim) => {
    if (!claim) return 0;
    let preloaded: LoadedHandler | undefined;
    try {
      preloaded = await restoredFromSnapshot();
    } catch (err) {
      // A template whose handler cannot initialise: its driver starts workers without a snapshot (and says why).
      writeStderr(`[svc-runtime] snapshot template failed to initialise: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      return 1;
    }
    return main(preloaded);
  })
  .then(
    (code) => process.exit(code),
    (err: unknown) => {
      writeStderr(`[svc-runtime] internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(70);
    },
  );
