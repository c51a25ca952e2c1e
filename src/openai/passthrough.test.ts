import { describe, expect, it } from "vitest";
import { configProblems, normalizeConfig } from "svc/internal";
import { handlerError, passthroughReply, passthroughRoute, queryInput, sseOfChunk, wantsStream } from "./passthrough.js";
import { passesOpenAiThrough } from "../service/endpoints/rows.js";
import type { EndpointRow } from "../service/store/types.js";

describe("the OpenAI pass-through's pure parts", () => {
  it("names the route after /openai, under v1/ only", () => {
    expect(passthroughRoute(["v1", "chat", "completions"])).toBe("/v1/chat/completions");
    expect(passthroughRoute(["v1", "models"])).toBe("/v1/models");
    expect(passthroughRoute(["v1"])).toBeUndefined();
    expect(passthroughRoute(["v2", "models"])).toBeUndefined();
    expect(passthroughRoute(["v1", "..", "x"])).toBeUndefined();
    expect(queryInput(new URLSearchParams("a=1&b=2&a=3"))).toEqual({ a: "3", b: "2" });
    expect(wantsStream({ stream: true })).toBe(true);
    expect(wantsStream({ stream: "true" })).toBe(false);
    expect(wantsStream([])).toBe(false);
  });

  it("reads vLLM's error responses as problems with their status", () => {
    const flat = handlerError({ object: "error", message: "bad", type: "BadRequestError", param: "messages", code: 422 });
    expect(flat).toMatchObject({ status: 422, detail: "bad", error: { message: "bad", type: "BadRequestError", param: "messages" } });
    expect(handlerError({ object: "error", message: "no code" })!.status).toBe(400);
    expect(handlerError({ error: { message: "nested", code: 503 } })!.status).toBe(503);
    expect(handlerError({ error: { message: "nested" } })!.status).toBe(500);
    expect(handlerError({ error: "text" })).toMatchObject({ status: 500, error: { message: "text" } });
    // An answer that merely has an `error` key beside others, or is not an object, is an answer.
    expect(handlerError({ id: "x", error: null })).toBeUndefined();
    expect(handlerError({ object: "list", data: [] })).toBeUndefined();
    expect(handlerError("data: {}\n\n")).toBeUndefined();
  });

  it("turns streamed chunks into server-sent events", () => {
    expect(sseOfChunk('data: {"a":1}\n\ndata: [DONE]\n\n')).toEqual({ text: 'data: {"a":1}\n\ndata: [DONE]\n\n', done: true });
    expect(sseOfChunk('data: {"a":1}')).toEqual({ text: 'data: {"a":1}\n\n', done: false });
    expect(sseOfChunk("two\nlines")).toEqual({ text: "data: two\ndata: lines\n\n", done: false });
    expect(sseOfChunk([{ a: 1 }, { b: 2 }])).toEqual({ text: 'data: {"a":1}\n\ndata: {"b":2}\n\n', done: false });
    expect(sseOfChunk({ a: 1 }).text).toBe('data: {"a":1}\n\n');
    expect(sseOfChunk("").text).toBe("");
    expect(passthroughReply([])).toBeNull();
    expect(passthroughReply([{ a: 1 }])).toEqual({ a: 1 });
    expect(passthroughReply([1, 2])).toEqual([1, 2]);
  });

  it("passes through for image endpoints and endpoints that declare it", () => {
    const row = (over: { imageName: string; artifactPath: string; openaiPassthrough?: boolean; type?: "queue" | "lb" }) =>
      ({
        type: over.type ?? "queue",
        artifactPath: over.artifactPath,
        resource: { imageName: over.imageName, ...(over.openaiPassthrough ? { openaiPassthrough: true } : {}) },
      }) as unknown as EndpointRow;
    expect(passesOpenAiThrough(row({ imageName: "my/vllm:1", artifactPath: "" }))).toBe(true);
    expect(passesOpenAiThrough(row({ imageName: "svc://abc", artifactPath: "/a.tgz" }))).toBe(false);
    expect(passesOpenAiThrough(row({ imageName: "svc-worker-cpu:0.1.0", artifactPath: "/a.tgz" }))).toBe(false);
    expect(passesOpenAiThrough(row({ imageName: "svc-worker-cpu:0.1.0", artifactPath: "/a.tgz", openaiPassthrough: true }))).toBe(true);
    expect(passesOpenAiThrough(row({ imageName: "my/server:1", artifactPath: "", type: "lb" }))).toBe(false);
    expect(configProblems({ name: "llm", openaiPassthrough: "yes" })).toEqual(['"openaiPassthrough" must be true or false']);
    expect(normalizeConfig({ name: "llm", openaiPassthrough: true }).openaiPassthrough).toBe(true);
  });
});
