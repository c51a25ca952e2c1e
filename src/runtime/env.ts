// What a worker learns from its environment at start (docs/worker-protocol.md, "What a worker gets at start").

import { UserError } from "../errors.js";
import { OUTPUT_CAPTURED_ENV } from "./output-marks.js";

export interface WorkerSettings {
  apiUrl: string;
  workerId: string;
  workerToken: string;
  endpointId: string;
  endpointName: string;
  app?: string;
  env?: string;
  apiKey?: string;
  /** Path or http(s) URL of the artifact .tar.gz; unset when `artifactDir` is given. */
  artifact?: string;
  /** An already extracted artifact directory. */
  artifactDir?: string;
  /** Where downloaded/extracted artifacts are cached. */
  artifactCacheDir?: string;
  maxConcurrency: number;
  /** The revision its service started it for (said at registration). */
  revision?: string;
  volumePath?: string;
  /** On SIGTERM, how long held jobs may run before they are handed back (ms). */
  stopGraceMs: number;
  /** The process that started this worker (process driver): when it is gone and the service too, exit. */
  parentPid?: number;
  /** How long the service may be unreachable before an orphaned worker gives up (ms). */
  orphanExitMs: number;
  /**
   * Orphaned once the service is unreachable that long, with no parent pid to check (SVC_ORPHAN_CHECK=unreachable:
   * a sandboxed process worker, whose parent is outside its pid namespace).
   */
  orphanWhenUnreachable: boolean;
  /** Load-balanced endpoints: where the worker serves its routes (default 127.0.0.1, any free port). */
  httpHost: string;
  httpPort: number;
  /**
   * Load-balanced endpoints under the process driver: a Unix socket path where the route server also listens,
   * so the service on the same machine reaches it without TCP (SVC_LB_SOCKET).
   */
  lbSocket?: string;
  /** A driver captures this process's stdout/stderr (SVC_OUTPUT_CAPTURED=1): lines are marked, not shipped. */
  outputCaptured: boolean;
}

function positiveInt(name: string, raw: string | undefined, fallback: number, problems: string[]): number {
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    problems.push(`${name} must be a positive integer (got "${raw}")`);
    return fallback;
  }
  return value;
}

/** Parse the worker environment; every missing or malformed variable is listed at once. */
export function readWorkerEnv(env: NodeJS.ProcessEnv): WorkerSettings {
  const problems: string[] = [];
  const required = (name: string): string => {
    const value = env[name];
    if (!value) {
      problems.push(`${name} is not set`);
      return "";
    }
    return value;
  };
  const optional = (name: string) => (env[name] ? env[name] : undefined);
  const settings: WorkerSettings = {
    apiUrl: required("SVC_API_URL").replace(/\/+$/, ""),
    workerId: required("SVC_WORKER_ID"),
    workerToken: required("SVC_WORKER_TOKEN"),
    endpointId: required("SVC_ENDPOINT_ID"),
    endpointName: required("SVC_ENDPOINT_NAME"),
    app: optional("SVC_APP"),
    env: optional("SVC_ENV"),
    apiKey: optional("SVC_API_KEY"),
    artifact: optional("SVC_ARTIFACT"),
    artifactDir: optional("SVC_ARTIFACT_DIR"),
    artifactCacheDir: optional("SVC_ARTIFACT_CACHE"),
    maxConcurrency: positiveInt("SVC_MAX_CONCURRENCY", env.SVC_MAX_CONCURRENCY, 1, problems),
    revision: optional("SVC_WORKER_REVISION"),
    volumePath: optional("SVC_VOLUME_PATH"),
    stopGraceMs: positiveInt("SVC_STOP_GRACE_MS", env.SVC_STOP_GRACE_MS, 10_000, problems),
    parentPid: env.SVC_PARENT_PID ? positiveInt("SVC_PARENT_PID", env.SVC_PARENT_PID, 0, problems) : undefined,
    orphanExitMs: positiveInt("SVC_ORPHAN_EXIT_MS", env.SVC_ORPHAN_EXIT_MS, 15_000, problems),
    orphanWhenUnreachable: env.SVC_ORPHAN_CHECK === "unreachable",
    httpHost: optional("SVC_HTTP_HOST") ?? "127.0.0.1",
    httpPort: env.SVC_HTTP_PORT ? positiveInt("SVC_HTTP_PORT", env.SVC_HTTP_PORT, 0, problems) : 0,
    lbSocket: optional("SVC_LB_SOCKET"),
    outputCaptured: env[OUTPUT_CAPTURED_ENV] === "1",
  };
  if (!settings.artifact && !settings.artifactDir) problems.push("one of SVC_ARTIFACT or SVC_ARTIFACT_DIR must be set");
  if (settings.apiUrl && !/^https?:\/\//.test(settings.apiUrl)) problems.push(`SVC_API_URL must be an http(s) URL (got "${settings.apiUrl}")`);
  if (problems.length > 0) {
    throw new UserError("The worker environment is incomplete", {
      problems,
      hint: "Workers are started by the svc service, which sets these variables (docs/worker-protocol.md).",
    });
  }
  return settings;
}
