// The variables a worker speaking the provider's protocol gets (docs/provider-workers.md): what the provider's
// Python worker SDK reads at start, pointing it at svc. The counterpart of env.ts (svc's own protocol) for
// workers started with `protocol: "provider"`.

import { providerUrlTemplates } from "../wire/provider-worker.js";

/** Where the provider mounts an endpoint's network volume in its workers: images built for it look there. */
export const PROVIDER_VOLUME_MOUNT = "/runpod-volume";

export interface ProviderWorkerIdentity {
  /** The service as the worker reaches it. */
  apiUrl: string;
  workerId: string;
  endpointId: string;
  /** The worker's own token (minted for it alone, revoked when it ends); the SDK sends it bare. */
  workerToken: string;
  /** How often the SDK pings, in ms (the service's heartbeat period: leases last several of them). */
  pingIntervalMs: number;
  /** What RUNPOD_POD_HOSTNAME says (the SDK puts it in its error reports); the worker's id when not given. */
  hostname?: string;
}

/** The provider's variables for one worker. Pure. */
export function providerWorkerEnv(w: ProviderWorkerIdentity): Record<string, string> {
  const urls = providerUrlTemplates(w.apiUrl, w.endpointId);
  return {
    RUNPOD_WEBHOOK_GET_JOB: urls.getJob,
    RUNPOD_WEBHOOK_POST_OUTPUT: urls.postOutput,
    RUNPOD_WEBHOOK_POST_STREAM: urls.postStream,
    RUNPOD_WEBHOOK_PING: urls.ping,
    RUNPOD_AI_API_KEY: w.workerToken,
    RUNPOD_POD_ID: w.workerId,
    RUNPOD_ENDPOINT_ID: w.endpointId,
    RUNPOD_POD_HOSTNAME: w.hostname ?? w.workerId,
    RUNPOD_PING_INTERVAL: String(Math.max(1000, Math.round(w.pingIntervalMs))),
    // The SDK's start-up checks probe a public DNS server and the GPUs, and exit the worker when they fail: a
    // worker without internet (or on CPU) would never start. svc watches its workers itself.
    RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
    RUNPOD_SKIP_GPU_CHECK: "true",
  };
}

/**
 * Set the provider's variables on `env` (which already holds the endpoint's own variables): they always win, so
 * user env cannot point a worker elsewhere or fake its identity.
 */
export function applyProviderEnv(env: Record<string, string | undefined>, w: ProviderWorkerIdentity): void {
  Object.assign(env, providerWorkerEnv(w));
}
