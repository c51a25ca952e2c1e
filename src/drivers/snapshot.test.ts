import { describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { privateTree, snapshotKey, snapshotRefusal, templateEnvironment } from "./snapshot.js";

describe("snapshot images' keys", () => {
  const runtime = { entry: "/svc/dist/runtime/worker.js", node: "/usr/bin/node", nodeVersion: "v20.0.0", entryModified: 1 };
  const env = {
    SVC_ENDPOINT_NAME: "model",
    SVC_WORKER_REVISION: "r1",
    MODEL: "small",
    SVC_WORKER_ID: "w1",
    SVC_WORKER_TOKEN: "t1",
    SVC_API_KEY: "k1",
    SVC_API_URL: "http://127.0.0.1:1",
    SVC_PARENT_PID: "10",
  };
  const key = (launch: { endpointId: string; revision?: string }, e: NodeJS.ProcessEnv, r: Record<string, unknown> = runtime) =>
    snapshotKey(launch, templateEnvironment(e), r);

  it("leaves the worker's identity out of the template's environment and the key", () => {
    const template = templateEnvironment(env);
    for (const name of ["SVC_WORKER_ID", "SVC_WORKER_TOKEN", "SVC_API_KEY", "SVC_API_URL", "SVC_PARENT_PID", "SVC_LB_SOCKET"])
      expect(template).not.toHaveProperty(name);
    expect(template).toMatchObject({ SVC_ENDPOINT_NAME: "model", MODEL: "small", UV_USE_IO_URING: "0" });
    const other = { ...env, SVC_WORKER_ID: "w2", SVC_WORKER_TOKEN: "t2", SVC_API_KEY: "k2", SVC_API_URL: "http://127.0.0.1:2", SVC_PARENT_PID: "11" };
    expect(key({ endpointId: "e", revision: "r1" }, other)).toBe(key({ endpointId: "e", revision: "r1" }, env));
  });

  it("changes with the revision, the endpoint's variables, the endpoint and the runtime", () => {
    const base = key({ endpointId: "e", revision: "r1" }, env);
    expect(key({ endpointId: "e", revision: "r2" }, env)).not.toBe(base);
    expect(key({ endpointId: "e", revision: "r1" }, { ...env, MODEL: "large" })).not.toBe(base);
    expect(key({ endpointId: "f", revision: "r1" }, env)).not.toBe(base);
    expect(key({ endpointId: "e", revision: "r1" }, env, { ...runtime, entryModified: 2 })).not.toBe(base);
  });

  it("is refused for GPU endpoints and prebuilt images, and where the host cannot checkpoint", () => {
    expect(snapshotRefusal({ computeType: "GPU" }, undefined)).toBe("GPU memory cannot be checkpointed by CRIU");
    expect(snapshotRefusal({ computeType: "CPU", image: "nginx" }, undefined)).toMatch(/prebuilt image/);
    expect(snapshotRefusal({ computeType: "CPU" }, "criu is not installed")).toBe("criu is not installed");
    expect(snapshotRefusal({ computeType: "CPU" }, undefined)).toBeUndefined();
  });
});

describe("snapshot images' modes", () => {
  it("makes every file 0600 and every directory 0700, whatever CRIU wrote", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-snap-modes-"));
    try {
      mkdirSync(join(dir, "sub"), { mode: 0o755 });
      writeFileSync(join(dir, "pages-1.img"), "secret pages", { mode: 0o644 });
      writeFileSync(join(dir, "sub", "core.img"), "x", { mode: 0o644 });
      privateTree(dir);
      const mode = (p: string) => statSync(p).mode & 0o777;
      expect([mode(dir), mode(join(dir, "sub")), mode(join(dir, "pages-1.img")), mode(join(dir, "sub", "core.img"))]).toEqual([0o700, 0o700, 0o600, 0o600]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
