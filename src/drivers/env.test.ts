import { describe, expect, it } from "vitest";
import { applyProtocolEnv } from "./env.js";
import type { WorkerLaunch } from "./types.js";

const launch = (extra: Partial<WorkerLaunch> = {}): WorkerLaunch => ({
  workerId: "w1",
  endpointId: "ep1",
  endpointName: "llm",
  app: "app",
  env: "prod",
  artifactPath: "/a.tar.gz",
  apiUrl: "http://127.0.0.1:1",
  workerToken: "t",
  environment: {},
  maxConcurrency: 1,
  computeType: "GPU",
  gpuTypeIds: ["HOPPER_141"],
  onLog: () => undefined,
  ...extra,
});

describe("applyProtocolEnv: the GPUs a worker sees", () => {
  it("exactly the ones it holds, by UUID, whatever the endpoint's or the host's variables say", () => {
    const env: Record<string, string | undefined> = { CUDA_VISIBLE_DEVICES: "0,1,2,3", NVIDIA_VISIBLE_DEVICES: "all" };
    applyProtocolEnv(env, launch({ gpus: ["GPU-a", "GPU-b"] }), { apiUrl: "http://x", artifact: "/a" });
    expect(env).toMatchObject({ CUDA_VISIBLE_DEVICES: "GPU-a,GPU-b", NVIDIA_VISIBLE_DEVICES: "GPU-a,GPU-b" });
  });

  it("a CPU worker none", () => {
    const env: Record<string, string | undefined> = { CUDA_VISIBLE_DEVICES: "0" };
    applyProtocolEnv(env, launch({ computeType: "CPU", gpuTypeIds: [], gpus: [] }), { apiUrl: "http://x", artifact: "/a" });
    expect(env).toMatchObject({ CUDA_VISIBLE_DEVICES: "", NVIDIA_VISIBLE_DEVICES: "void" });
  });

  it("no assignment (a scheduler places GPUs): left to the scheduler", () => {
    const env: Record<string, string | undefined> = {};
    applyProtocolEnv(env, launch(), { apiUrl: "http://x", artifact: "/a" });
    expect(env.CUDA_VISIBLE_DEVICES).toBeUndefined();
    expect(env.NVIDIA_VISIBLE_DEVICES).toBeUndefined();
  });
});

describe("applyProtocolEnv: BUCKET_* for the upload helper", () => {
  const bucket = { endpointUrl: "https://svc.test/s3/vol1", accessKeyId: "SVCWABCDEFGHIJKLMNOP", secretAccessKey: "s" };

  it("svc's and provider workers alike get the worker's key on its endpoint's volume", () => {
    for (const protocol of ["svc", "provider"] as const) {
      const env: Record<string, string | undefined> = {};
      applyProtocolEnv(env, launch({ bucket, protocol }), { apiUrl: "http://x", artifact: "/a" });
      expect(env).toMatchObject({ BUCKET_ENDPOINT_URL: bucket.endpointUrl, BUCKET_ACCESS_KEY_ID: bucket.accessKeyId, BUCKET_SECRET_ACCESS_KEY: "s" });
    }
  });

  it("an endpoint that names its own bucket endpoint keeps all three of its own", () => {
    const env: Record<string, string | undefined> = {
      BUCKET_ENDPOINT_URL: "https://s3.example.com",
      BUCKET_ACCESS_KEY_ID: "AKIA",
      BUCKET_SECRET_ACCESS_KEY: "mine",
    };
    applyProtocolEnv(env, launch({ bucket }), { apiUrl: "http://x", artifact: "/a" });
    expect(env).toMatchObject({ BUCKET_ENDPOINT_URL: "https://s3.example.com", BUCKET_ACCESS_KEY_ID: "AKIA", BUCKET_SECRET_ACCESS_KEY: "mine" });
  });
});
