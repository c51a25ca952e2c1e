import { describe, expect, it } from "vitest";
import type { EndpointRow, StoreOp } from "../store/types.js";
import { ReleaseManager, type ProbeRunner } from "./manager.js";

/** A probe runner written for this test: records what the manager asks, starts nothing. */
class RecordingRunner implements ProbeRunner {
  started: Array<{ id: string; endpoint: string }> = [];
  stopped: string[] = [];
  promoted: string[] = [];
  runs?: (row: EndpointRow) => boolean;
  startProbe(row: EndpointRow): string {
    const id = `w${this.started.length + 1}`;
    this.started.push({ id, endpoint: row.id });
    return id;
  }
  stopProbe(id: string): void {
    this.stopped.push(id);
  }
  promote(ids: string[]): void {
    this.promoted.push(...ids);
  }
}

const row = (id: string, name: string): EndpointRow =>
  ({
    id,
    name,
    userId: "u",
    app: "a",
    env: "prod",
    type: "queue",
    revision: `${id}-new`,
    artifactPath: "",
    createdAt: 0,
    updatedAt: 0,
    completed: 0,
    failed: 0,
    retried: 0,
    resource: {},
  }) as unknown as EndpointRow;

function setup(attempts = 2, startTimeoutMs = 5000) {
  const runner = new RecordingRunner();
  const writes: StoreOp[][] = [];
  const manager = new ReleaseManager({ write: async (ops) => void writes.push(ops), runner: () => runner, log: () => undefined, attempts, startTimeoutMs });
  const commits: StoreOp[][] = [];
  const request = (probe: EndpointRow[]) => ({
    userId: "u",
    app: "a",
    env: "prod",
    buildId: "b2",
    previousBuildId: "b1",
    kind: "deploy" as const,
    probe: probe.map((r) => ({ row: r, action: "update" as const })),
    commit: async (extra: StoreOp[]) => void commits.push(extra),
  });
  return { runner, manager, writes, commits, request };
}

describe("ReleaseManager", () => {
  it("does not probe an endpoint its runner cannot start (an image endpoint without an image driver): the others decide the switch", async () => {
    const { runner, manager, commits, request } = setup();
    runner.runs = (r: EndpointRow) => r.id !== "e2";
    const { release, settled } = await manager.begin(request([row("e1", "api"), row("e2", "llm")]));
    expect(runner.started.map((s) => s.endpoint)).toEqual(["e1"]);
    expect(release.endpoints.map((e) => [e.name, e.state])).toEqual([
      ["api", "starting"],
      ["llm", "ready"],
    ]);
    manager.ready("w1");
    expect((await settled).state).toBe("live");
    expect(commits).toHaveLength(1);
    // Nothing it can start: switched at once.
    const alone = await manager.begin(request([row("e2", "llm")]));
    expect(alone.release.state).toBe("live");
    expect(runner.started).toHaveLength(1);
  });

  it("commits and promotes once every probe is up; the probes' endpoint rows are the new ones meanwhile", async () => {
    const { runner, manager, commits, request } = setup();
    const { release, settled } = await manager.begin(request([row("e1", "api"), row("e2", "jobs")]));
    expect(release.state).toBe("starting");
    expect(runner.started.map((s) => s.endpoint)).toEqual(["e1", "e2"]);
    expect(manager.endpointFor("w1")?.revision).toBe("e1-new");
    manager.ready("w1");
    expect(commits).toHaveLength(0);
    manager.ready("w2");
    const outcome = await settled;
    expect(outcome.state).toBe("live");
    expect(commits).toHaveLength(1);
    expect(runner.promoted.sort()).toEqual(["w1", "w2"]);
    expect(manager.isProbe("w1")).toBe(false);
  });

  it("replaces a probe that failed, then fails the release and stops the other probes", async () => {
    const { runner, manager, commits, request } = setup(2);
    const { settled } = await manager.begin(request([row("e1", "api"), row("e2", "jobs")]));
    manager.ready("w2");
    manager.failed("w1", "Error: KEY is not set");
    expect(runner.stopped).toEqual(["w1"]);
    await new Promise((r) => setTimeout(r, 700));
    expect(runner.started.map((s) => s.id)).toEqual(["w1", "w2", "w3"]);
    manager.exited("w3", { code: 1, signal: null });
    const outcome = await settled;
    expect(outcome).toMatchObject({ state: "failed", error: { endpoint: "api" } });
    expect(outcome.error!.message).toContain("exited before it was ready (code 1");
    expect(commits).toHaveLength(0);
    expect(runner.stopped.sort()).toEqual(["w1", "w2", "w3"]);
    expect(runner.promoted).toEqual([]);
  });

  it("counts a probe that does not come up in time as failed", async () => {
    const { manager, request } = setup(1, 100);
    const { settled } = await manager.begin(request([row("e1", "api")]));
    const outcome = await settled;
    expect(outcome.error?.message).toContain("had not loaded its handler after 0 s");
  });

  it("switches at once when nothing needs a probe, and a newer release supersedes a starting one", async () => {
    const { manager, commits, request, runner } = setup();
    const first = await manager.begin(request([row("e1", "api")]));
    const second = await manager.begin(request([]));
    expect((await first.settled).state).toBe("superseded");
    expect(runner.stopped).toEqual(["w1"]);
    expect(second.release.state).toBe("live");
    expect(commits).toHaveLength(1);
  });
});
