import { afterEach, describe, expect, it } from "vitest";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Endpoint, connect, getMeta } from "./endpoint.js";
import { __defineHandler, UnknownFunctionError } from "./handler.js";
import { setRuntime, NoContextError, findDevSession, resolveEndpoint } from "./context.js";
import { deploy, undeploy, deleteEnvironment } from "./lifecycle.js";
import { UsageError } from "./errors.js";

const signal = new AbortController().signal;

afterEach(() => setRuntime(undefined));

describe("Endpoint()", () => {
  it("rejects invalid configuration with every problem named", () => {
    expect(() => Endpoint({ name: "Bad Name", gpu: "ANY", cpu: "cpu3c-1-2" })).toThrow(/"name" "Bad Name" must be.*mutually exclusive/s);
    expect(() => Endpoint({ name: "ok", workers: [3, 1] })).toThrow(/"workers" \[min, max\]/);
  });

  it("takes GPU pool ids, card names and ANY with a gpuCount; an unknown GPU type names the nearest", () => {
    expect(Endpoint({ name: "big", gpu: "HOPPER_141", gpuCount: 2 }).config).toEqual({ name: "big", gpu: "HOPPER_141", gpuCount: 2 });
    expect(() => Endpoint({ name: "ok", gpu: ["NVIDIA H200", "ADA_24", "ANY"] })).not.toThrow();
    expect(() => Endpoint({ name: "typo", gpu: ["ADA_24", "HOPER_141"] })).toThrow(/"gpu" names an unknown GPU type "HOPER_141": did you mean "HOPPER_141"\?/);
    expect(() => Endpoint({ name: "cpu", gpuCount: 2 })).toThrow(/"gpuCount" needs "gpu"/);
  });

  it("takes a scaling policy, and names what is wrong with one", () => {
    expect(Endpoint({ name: "model", scaler: { type: "QUEUE_DELAY", value: 4 } }).config.scaler).toEqual({ type: "QUEUE_DELAY", value: 4 });
    expect(() => Endpoint({ name: "model", scaler: { type: "REQUEST_COUNT", value: 0 } })).toThrow(/"scaler.value" must be an integer from 1 to 3600/);
    // @ts-expect-error an unknown policy is a type error too
    expect(() => Endpoint({ name: "model", scaler: { type: "LATER", value: 4 } })).toThrow(/"scaler.type" must be one of QUEUE_DELAY, REQUEST_COUNT/);
  });

  it("wraps a function, keeping its name and marking its kind", () => {
    const fn = Endpoint({ name: "echo" })(async function echo(input: { x: number }) {
      return input.x * 2;
    });
    expect(fn.name).toBe("echo");
    expect(fn.endpointName).toBe("echo");
    expect(getMeta(fn)).toMatchObject({ kind: "function", config: { name: "echo" } });
    const gen = Endpoint({ name: "gen" })(async function* gen() {
      yield 1;
    });
    expect(getMeta(gen)).toMatchObject({ kind: "generator" });
  });

  it("runs in-process inside its own endpoint's worker", async () => {
    const fn = Endpoint({ name: "echo" })(async (input: { x: number }) => input.x * 2);
    setRuntime({ endpointName: "echo", endpointId: "e1", apiUrl: "http://127.0.0.1:1" });
    await expect(fn({ x: 21 })).resolves.toBe(42);
  });

  it("without any context, a call says to start svc dev or set SVC_APP/SVC_ENV", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-noctx-"));
    const cwd = process.cwd();
    const saved = { app: process.env.SVC_APP, env: process.env.SVC_ENV };
    delete process.env.SVC_APP;
    delete process.env.SVC_ENV;
    process.chdir(dir);
    try {
      const fn = Endpoint({ name: "echo" })(async (input: { x: number }) => input.x);
      const err = await fn({ x: 1 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoContextError);
      expect((err as NoContextError).message).toContain('Cannot call endpoint "echo"');
      expect((err as NoContextError).hint).toMatch(/svc dev.*SVC_APP and SVC_ENV/);
    } finally {
      process.chdir(cwd);
      Object.assign(process.env, Object.fromEntries(Object.entries({ SVC_APP: saved.app, SVC_ENV: saved.env }).filter(([, v]) => v !== undefined)));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("finds a live dev session from a subdirectory and ignores a dead one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-devsession-"));
    mkdirSync(join(dir, ".svc"));
    mkdirSync(join(dir, "scripts", "deep"), { recursive: true });
    const session = {
      pid: process.pid,
      url: "http://127.0.0.1:9",
      apiKey: "k",
      app: "a",
      env: "dev",
      endpoints: { echo: { id: "abc", url: "http://127.0.0.1:9/v2/abc" } },
    };
    writeFileSync(join(dir, ".svc", "dev-session.json"), JSON.stringify(session));
    expect(findDevSession(join(dir, "scripts", "deep"))?.endpoints.echo?.id).toBe("abc");
    const cwd = process.cwd();
    process.chdir(join(dir, "scripts"));
    try {
      await expect(resolveEndpoint("echo")).resolves.toEqual({ url: "http://127.0.0.1:9/v2/abc", apiKey: "k" });
      await expect(resolveEndpoint("other")).rejects.toThrow(/not part of the running svc dev session/);
    } finally {
      process.chdir(cwd);
    }
    writeFileSync(join(dir, ".svc", "dev-session.json"), JSON.stringify({ ...session, pid: 2 ** 22 + 12345 }));
    expect(findDevSession(join(dir, "scripts"))).toBeUndefined();
    rmSync(dir, { recursive: true, force: true });
  });

  it("collects load-balanced routes, chainable", () => {
    const api = Endpoint({ name: "api" });
    api.post("/process", async (body: { n: number }) => ({ ok: body.n })).get("/status", () => ({ up: true }));
    expect(api.routes.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /process", "GET /status"]);
    expect(() => api.get("status", () => 1)).toThrow(/must start with "\/"/);
  });

  it("connect() refuses a class that is not an endpoint", () => {
    class Plain {}
    expect(() => connect(Plain)).toThrow(/decorated with @Endpoint/);
  });
});

describe("__defineHandler()", () => {
  const one = Endpoint({ name: "math" });
  const double = one(async function double(input: { x: number }) {
    return input.x * 2;
  });
  const count = one(async function* count(input: { n: number }) {
    for (let i = 0; i < input.n; i++) yield i;
  });
  class Counter {
    calls = 0;
    async hit() {
      return ++this.calls;
    }
  }
  const decorated = Endpoint({ name: "counter" })(Counter);

  it("invokes the only function when the job names none", async () => {
    const handler = __defineHandler({ endpoint: "math", kind: "queue", functions: [{ name: "double", kind: "function", ref: double }] });
    await handler.init();
    const result = handler.invoke(undefined, { x: 4 }, { jobId: "j", signal, progress: () => undefined });
    expect(result.kind).toBe("value");
    await expect(result.kind === "value" && result.value).resolves.toBe(8);
  });

  it("streams generators and refuses unknown or unnamed functions", async () => {
    const handler = __defineHandler({
      endpoint: "math",
      kind: "queue",
      functions: [
        { name: "double", kind: "function", ref: double },
        { name: "count", kind: "generator", ref: count },
      ],
    });
    await handler.init();
    const result = handler.invoke("count", { n: 3 }, { jobId: "j", signal, progress: () => undefined });
    expect(result.kind).toBe("stream");
    const seen: unknown[] = [];
    if (result.kind === "stream") for await (const v of result.stream) seen.push(v);
    expect(seen).toEqual([0, 1, 2]);
    expect(() => handler.invoke("nope", {}, { jobId: "j", signal, progress: () => undefined })).toThrow(UnknownFunctionError);
    expect(() => handler.invoke("nope", {}, { jobId: "j", signal, progress: () => undefined })).toThrow(/has no function "nope"; it serves: double, count/);
    expect(() => handler.invoke(undefined, {}, { jobId: "j", signal, progress: () => undefined })).toThrow(/serves several functions/);
  });

  it("keeps one class instance per worker", async () => {
    const handler = __defineHandler({ endpoint: "counter", kind: "queue", functions: [{ name: "hit", kind: "method", classRef: decorated, method: "hit" }] });
    await handler.init();
    await handler.init();
    const values = [];
    for (let i = 0; i < 3; i++) {
      const r = handler.invoke("hit", undefined, { jobId: String(i), signal, progress: () => undefined });
      values.push(r.kind === "value" ? await r.value : undefined);
    }
    expect(values).toEqual([1, 2, 3]);
  });
});

describe("lifecycle calls from the SDK", () => {
  it("throw a usage error naming the svc command", () => {
    expect(() => deploy()).toThrow(UsageError);
    for (const [fn, command] of [
      [deploy, "svc deploy --env"],
      [undeploy, "svc undeploy"],
      [deleteEnvironment, "svc env delete"],
    ] as const) {
      let caught: unknown;
      try {
        fn();
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(UsageError);
      expect((caught as UsageError).hint).toContain(command);
    }
  });
});
