import { describe, expect, it } from "vitest";
import { claimedEnvironment, parseClaim } from "./claim.js";

describe("a pooled runtime's claim", () => {
  it("keeps the container's own environment, drops every SVC_* of the pool's, and takes the claim's", () => {
    const env = claimedEnvironment(
      { PATH: "/usr/bin", HOME: "/home/svc", SVC_POOLED: "1", SVC_POOL_CHANNEL: "stdin" },
      { env: { SVC_WORKER_ID: "w1", GREETING: "hi" } },
    );
    expect(env).toEqual({ PATH: "/usr/bin", HOME: "/home/svc", SVC_WORKER_ID: "w1", GREETING: "hi" });
  });

  it("reads one JSON line with an env object of strings; anything else is not a claim", () => {
    expect(parseClaim('{"env":{"A":"1","B":2}}')).toEqual({ env: { A: "1" } });
    expect(parseClaim("not json")).toBeUndefined();
    expect(parseClaim('{"env":null}')).toBeUndefined();
    expect(parseClaim("[]")).toBeUndefined();
  });
});
