// Which routes take the bare key (no "Bearer"): the spec's job API examples send it so; management operations
// use bearer authentication only. The real service answering either form is in test/management/access.test.ts.

import { describe, expect, it } from "vitest";
import { acceptsBareKey } from "../api.js";
import { credentialFromHeader } from "../http/wire.js";

describe("credentialFromHeader", () => {
  it("tells the bearer form from the bare key", () => {
    expect(credentialFromHeader("Bearer abc")).toEqual({ key: "abc", bearer: true });
    expect(credentialFromHeader("bearer  abc ")).toEqual({ key: "abc", bearer: true });
    expect(credentialFromHeader("abc")).toEqual({ key: "abc", bearer: false });
    expect(credentialFromHeader("Basic a b")).toBeUndefined();
    expect(credentialFromHeader(undefined)).toBeUndefined();
  });
});

describe("acceptsBareKey", () => {
  const id = "3f2a9c0d1e2b4a5c";
  it("accepts it on an endpoint's job routes, job list and OpenAI route", () => {
    for (const action of [
      "run",
      "runsync",
      `status/j1`,
      `status-sync/j1?wait=2000`,
      "stream/j1",
      "cancel/j1",
      "retry/j1",
      "purge-queue",
      "health",
      "jobs?limit=5",
    ]) {
      expect([action, acceptsBareKey(`/v2/${id}/${action}`, "127.0.0.1:8600")]).toEqual([action, true]);
    }
    expect(acceptsBareKey(`/v2/${id}/openai/v1/chat/completions`, undefined)).toBe(true);
    expect(acceptsBareKey(`/v2/${id}/openai/v1/models`, undefined)).toBe(true);
  });

  it("accepts it on load-balanced addresses, by path and by host name", () => {
    expect(acceptsBareKey(`/lb/${id}/items/42?q=1`, "127.0.0.1:8600")).toBe(true);
    expect(acceptsBareKey("/v1/keys", `${id}.lb.localhost:8600`)).toBe(true);
  });

  it("refuses it on management, state, logs and worker routes, and on unknown ones", () => {
    for (const path of [
      "/v1/keys",
      "/v1/keys/key123",
      "/v1/endpoints",
      `/v1/endpoints/${id}`,
      `/v1/endpoints/${id}/logs`,
      "/v1/templates",
      "/v1/apps",
      "/v1/apps/shop/environments/prod",
      "/v2/network-volumes",
      "/v2/network-volumes/vol1/health",
      "/v2/data-centers",
      "/v2/endpoints/x/run",
      "/_worker/v1/take",
      `/v2/${id}`,
      `/v2/${id}/unknown`,
      "/elsewhere",
    ]) {
      expect([path, acceptsBareKey(path, "127.0.0.1:8600")]).toEqual([path, false]);
    }
  });
});
