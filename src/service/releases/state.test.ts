import { describe, expect, it } from "vitest";
import { errorHead, newRelease, oneLive, probeFailed, probeReady, probeStarted, released, superseded } from "./state.js";

const base = () =>
  newRelease({
    id: "r1",
    userId: "u",
    app: "a",
    env: "prod",
    buildId: "b2",
    previousBuildId: "b1",
    kind: "deploy",
    startedAt: 1,
    endpoints: [
      { name: "api", id: "e1", action: "update" },
      { name: "jobs", id: "e2", action: "create" },
    ],
  });

describe("release transitions", () => {
  it("switches only once every endpoint has a probe up", () => {
    let r = probeStarted(probeStarted(base(), "e1"), "e2");
    const first = probeReady(r, "e1");
    expect(first.switchNow).toBe(false);
    r = first.release;
    const second = probeReady(r, "e2");
    expect(second.switchNow).toBe(true);
    expect(released(second.release, 9)).toMatchObject({ state: "live", finishedAt: 9 });
  });

  it("retries a failed probe until the endpoint is out of attempts, then fails the whole release", () => {
    let r = probeStarted(base(), "e1");
    const once = probeFailed(r, "e1", "boom", 2, 5);
    expect(once.retry).toBe(true);
    expect(once.release.state).toBe("starting");
    r = probeReady(probeStarted(once.release, "e2"), "e2").release;
    const twice = probeFailed(probeStarted(r, "e1"), "e1", "boom again", 2, 7);
    expect(twice.retry).toBe(false);
    expect(twice.release).toMatchObject({ state: "failed", finishedAt: 7, error: { endpoint: "api", message: "boom again" } });
    expect(twice.release.endpoints.find((e) => e.id === "e1")).toMatchObject({ state: "failed", attempts: 2, failures: 2 });
    // All or nothing: the other endpoint came up, the release still did not switch.
    expect(probeReady(twice.release, "e2").switchNow).toBe(false);
  });

  it("ignores news about a release that is over, and a superseded one keeps its outcome if it had one", () => {
    const failed = probeFailed(probeStarted(base(), "e1"), "e1", "x", 1, 3).release;
    expect(probeFailed(failed, "e2", "y", 1, 4).release).toBe(failed);
    expect(superseded(failed, 5)).toBe(failed);
    expect(superseded(base(), 5)).toMatchObject({ state: "superseded", finishedAt: 5 });
  });

  it("answers one live release an environment: the newest that went live; earlier ones were replaced", () => {
    const live = (id: string) => ({ ...released(base(), 1), id });
    const failed = { ...probeFailed(probeStarted(base(), "e1"), "e1", "x", 1, 3).release, id: "f" };
    const answered = oneLive([failed, live("r3"), live("r2"), { ...superseded(base(), 2), id: "s" }, live("r1")]);
    expect(answered.map((r) => [r.id, r.state])).toEqual([
      ["f", "failed"],
      ["r3", "live"],
      ["r2", "replaced"],
      ["s", "superseded"],
      ["r1", "replaced"],
    ]);
  });

  it("keeps the head of a long error", () => {
    const long = Array.from({ length: 30 }, (_, i) => `line ${i}`).join("\n");
    const head = errorHead(long, 3);
    expect(head.split("\n")).toEqual(["line 0", "line 1", "line 2", "... (27 more lines in the endpoint's logs)"]);
    expect(errorHead("short")).toBe("short");
  });
});
