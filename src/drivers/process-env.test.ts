import { describe, expect, it } from "vitest";
import { allowedHostEnv } from "./host-env.js";
import { workerEnvironment, workerLimits } from "./process-env.js";
import { testLaunch } from "./launch-fixture.js";

const launch = testLaunch;

describe("workerEnvironment", () => {
  it("takes the allowed host variables, adds user env, and protocol variables win", () => {
    const env = workerEnvironment(
      launch(),
      allowedHostEnv({ PATH: "/bin", SVC_API_KEY: "parent-secret", SVC_DATA_DIR: "/d", AWS_SECRET_ACCESS_KEY: "operator" }),
      { artifactDir: "/x/dir", parentPid: 77 },
    );
    expect(env).toMatchObject({
      PATH: "/bin",
      USER_FLAG: "on",
      SVC_API_KEY: "owner-key",
      SVC_WORKER_TOKEN: "worker-token",
      SVC_ARTIFACT_DIR: "/x/dir",
      SVC_MAX_CONCURRENCY: "2",
      SVC_PARENT_PID: "77",
    });
    expect(env.SVC_DATA_DIR).toBeUndefined();
    expect(env.AWS_SECRET_ACCESS_KEY).toBeUndefined();
    expect(env.SVC_VOLUME_PATH).toBeUndefined();
    expect(env.SVC_ORPHAN_CHECK).toBeUndefined();
    expect(
      workerEnvironment(launch({ apiKey: undefined }), allowedHostEnv({ SVC_API_KEY: "parent-secret" }), { artifactDir: "/x" }).SVC_API_KEY,
    ).toBeUndefined();
  });

  it("sandboxed: in-sandbox paths, no parent pid (orphaned when the service is unreachable), the driver's address", () => {
    const env = workerEnvironment(
      launch({ volumePath: "/data/volumes/v" }),
      {},
      {
        artifactDir: "/svc/code",
        volumePath: "/svc/volume",
        orphanWhenUnreachable: true,
        lbSocket: "/svc/run/lb.sock",
        http: { host: "127.0.0.1", port: 4100 },
      },
    );
    expect(env).toMatchObject({
      SVC_ARTIFACT_DIR: "/svc/code",
      SVC_VOLUME_PATH: "/svc/volume",
      SVC_ORPHAN_CHECK: "unreachable",
      SVC_LB_SOCKET: "/svc/run/lb.sock",
      SVC_HTTP_HOST: "127.0.0.1",
      SVC_HTTP_PORT: "4100",
    });
    expect(env.SVC_PARENT_PID).toBeUndefined();
  });
});

describe("workerLimits", () => {
  const defaults = { pids: 512, tmpMb: 1024, shmMb: 64 };
  it("limits a worker by its endpoint's instance, /tmp and /dev/shm to at most its memory; defaults where the instance names none", () => {
    expect(workerLimits({ placement: { cpus: 2, memoryMb: 4096, gpus: 0 } }, defaults)).toEqual({
      limits: { pids: 512, memoryBytes: 4096 * 2 ** 20, cpus: 2 },
      tmpBytes: 1024 * 2 ** 20,
      shmBytes: 64 * 2 ** 20,
    });
    expect(workerLimits({ placement: { cpus: 1, memoryMb: 512, gpus: 0 } }, defaults).tmpBytes).toBe(512 * 2 ** 20);
    expect(workerLimits({ placement: { cpus: 1, memoryMb: 32, gpus: 0 } }, defaults).shmBytes).toBe(32 * 2 ** 20);
    expect(workerLimits({ placement: { gpus: 1 } }, defaults)).toEqual({ limits: { pids: 512 }, tmpBytes: 1024 * 2 ** 20, shmBytes: 64 * 2 ** 20 });
    expect(workerLimits({}, { ...defaults, memoryMb: 256 }).limits.memoryBytes).toBe(256 * 2 ** 20);
  });
});
