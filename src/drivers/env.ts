// The protocol variables every worker gets (docs/worker-protocol.md), shared by the drivers: they differ only in
// where the service, the artifact and the volume are as the worker sees them.

import type { WorkerLaunch } from "./types.js";

export interface WorkerPlacement {
  apiUrl: string;
  artifact: string;
  artifactDir?: string;
  volumePath?: string;
  parentPid?: number;
}

/**
 * Set the protocol variables on `env` (which already holds the endpoint's own variables): they always win, and a
 * protocol variable with no value is removed, so user env cannot fake one.
 */
export function applyProtocolEnv(env: Record<string, string | undefined>, launch: WorkerLaunch, placement: WorkerPlacement): void {
  const protocol: Record<string, string | undefined> = {
    SVC_API_URL: placement.apiUrl,
    SVC_WORKER_ID: launch.workerId,
    SVC_WORKER_TOKEN: launch.workerToken,
    SVC_ENDPOINT_ID: launch.endpointId,
    SVC_ENDPOINT_NAME: launch.endpointName,
    SVC_APP: launch.app,
    SVC_ENV: launch.env,
    SVC_API_KEY: launch.apiKey,
    SVC_ARTIFACT: placement.artifact,
    SVC_ARTIFACT_DIR: placement.artifactDir,
    SVC_MAX_CONCURRENCY: String(launch.maxConcurrency),
    SVC_VOLUME_PATH: placement.volumePath,
    SVC_PARENT_PID: placement.parentPid === undefined ? undefined : String(placement.parentPid),
  };
  for (const [key, value] of Object.entries(protocol)) {
    if (value !== undefined && value !== "") env[key] = value;
    else delete env[key];
  }
}
