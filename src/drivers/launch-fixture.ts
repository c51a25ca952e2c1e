// A worker's launch as the process driver's unit tests start it: a CPU worker of endpoint "fns" with a token, an
// owner key, two variables of its own (one trying to override the token) and a concurrency of 2. Test-only (the
// build leaves *-fixture.ts out).

import type { WorkerLaunch } from "./types.js";

export function testLaunch(extra: Partial<WorkerLaunch> = {}): WorkerLaunch {
  return {
    workerId: "w1",
    endpointId: "ep1",
    endpointName: "fns",
    app: "app",
    env: "dev",
    artifactPath: "/artifacts/a.tar.gz",
    apiUrl: "http://127.0.0.1:9",
    workerToken: "worker-token",
    apiKey: "owner-key",
    environment: { USER_FLAG: "on", SVC_WORKER_TOKEN: "user-cannot-override" },
    maxConcurrency: 2,
    computeType: "CPU",
    gpuTypeIds: [],
    onLog: () => undefined,
    ...extra,
  };
}
