// Loading real handlers (bundled by esbuild from fixtures/runtime-basic) out of an extracted artifact.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { extractArtifactCached } from "../../src/artifact/extract.js";
import { handlerPath, importHandler, installRuntimeContext } from "../../src/runtime/handler.js";
import { type LoadedHandler, setRuntime } from "svc/internal";
import { buildTestArtifact } from "./artifact.js";

let work: string;
let dir: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-handler-"));
  dir = await extractArtifactCached((await buildTestArtifact(join(work, "a.tar.gz"))).path, join(work, "cache"));
});
afterAll(async () => {
  setRuntime(undefined);
  await rm(work, { recursive: true, force: true });
});

const ctx = () => ({ jobId: "j1", signal: new AbortController().signal });

async function load(name: string): Promise<LoadedHandler> {
  let handler: LoadedHandler | undefined;
  installRuntimeContext(
    { endpointName: name, endpointId: `ep-${name}`, apiUrl: "http://127.0.0.1:1" },
    () => handler,
    () => undefined,
  );
  handler = await importHandler(await handlerPath(dir, name));
  await handler.init();
  return handler;
}

describe("handler loading", () => {
  it("runs async, sync and generator functions of a multi-function endpoint", async () => {
    const h = await load("fns");
    expect(h.functionNames).toEqual(["add", "upper", "fail", "count", "nap", "ticker", "say", "stray"]);
    const added = h.invoke("add", { a: 2, b: 3 }, ctx());
    expect(added.kind).toBe("value");
    expect(await (added as { value: Promise<unknown> }).value).toMatchObject({ sum: 5 });
    expect(await (h.invoke("upper", { text: "ok" }, ctx()) as { value: Promise<unknown> }).value).toBe("OK");
    const counted = h.invoke("count", { count: 3, delayMs: 1 }, ctx());
    expect(counted.kind).toBe("stream");
    const seen: unknown[] = [];
    for await (const v of (counted as { stream: AsyncIterable<{ i: number }> }).stream) seen.push(v.i);
    expect(seen).toEqual([0, 1, 2]);
    expect(() => h.invoke("nope", {}, ctx())).toThrow(/has no function "nope"; it serves: add, upper/);
    expect(() => h.invoke(undefined, {}, ctx())).toThrow(/serves several functions/);
  });

  it("lets a single-function endpoint omit the function name", async () => {
    const h = await load("single");
    expect(await (h.invoke(undefined, { x: 1 }, ctx()) as { value: Promise<unknown> }).value).toEqual({ echo: { x: 1 } });
  });

  it("keeps one class instance, also for in-process calls through invokeLocal", async () => {
    const h = await load("counter");
    const call = async (name: string) => (await (h.invoke(name, {}, ctx()) as { value: Promise<{ n: number }> }).value).n;
    expect(await call("hit")).toBe(1);
    // hitTwice calls connect(Counter).hit twice: in-process, on the same instance.
    expect(await call("hitTwice")).toBe(3);
    expect(await call("hit")).toBe(4);
  });

  it("explains a missing handler", async () => {
    await expect(handlerPath(dir, "ghost")).rejects.toThrow(/no handler for endpoint "ghost".*\n?/);
    await expect(handlerPath(dir, "ghost")).rejects.toMatchObject({ hint: expect.stringContaining("fns, single, counter") });
    await expect(handlerPath(dir, "../x")).rejects.toThrow(/Invalid endpoint name/);
  });
});
