import { describe, expect, it } from "vitest";
import { JobEngine, WorkerEvents, type WorkerEventName } from "./index.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import { openSqliteStore } from "../store/sqlite.js";
import { errorMessage } from "../../errors.js";

async function engineWithLog(): Promise<{ engine: JobEngine; seen: string[] }> {
  const engine = new JobEngine(openSqliteStore(":memory:", SQLITE_MIGRATIONS), { leaseMs: 30_000, heartbeatMs: 5_000 });
  await engine.load([]);
  const seen: string[] = [];
  const names: WorkerEventName[] = ["known", "addressed", "registered", "ready", "promoted", "draining", "gone"];
  for (const name of names)
    engine.workerEvents.on(name, (e) => {
      const how = "how" in e ? ` ${e.how}` : "died" in e && e.died !== undefined ? ` (${e.died})` : "";
      seen.push(`${name} ${e.worker.id}${how}`);
    });
  return { engine, seen };
}

describe("the worker registry", () => {
  it("a queue worker is ready when it registers, once, however often it registers", async () => {
    const { engine, seen } = await engineWithLog();
    engine.register("w1", "ep1", 2, "register");
    engine.register("w1", "ep1", 2, "register");
    expect(seen).toEqual(["known w1", "registered w1 register", "ready w1 register", "registered w1 register"]);
    expect(engine.workers.get("w1")).toMatchObject({ registered: true, ready: true, concurrency: 2 });
  });

  it("a worker that registers a server is ready only once its /ping says so", async () => {
    const { engine, seen } = await engineWithLog();
    engine.register("w2", "lb1", 1, "register", { address: "http://127.0.0.1:9001", credential: "c" });
    expect(engine.workers.get("w2")).toMatchObject({ registered: true, ready: false, serves: { address: "http://127.0.0.1:9001", credential: "c" } });
    engine.workerReady("w2", "ping");
    engine.workerReady("w2", "ping");
    expect(seen).toEqual(["known w2", "registered w2 register", "ready w2 ping"]);
  });

  it("keeps what a driver said of a worker's addresses, field by field, and tells only of a change", async () => {
    const { engine, seen } = await engineWithLog();
    engine.manageWorker("w3", "ep1", { revision: "r7", standby: true });
    engine.workerAddressed("w3", { address: "http://127.0.0.1:32768", direct: undefined });
    engine.workerAddressed("w3", { direct: "http://172.17.0.5:8080" });
    engine.workerAddressed("w3", {});
    engine.workerAddressed("unknown", { address: "http://127.0.0.1:1" });
    expect(engine.workers.get("w3")).toMatchObject({
      managed: true,
      revision: "r7",
      standby: true,
      reach: { address: "http://127.0.0.1:32768", direct: "http://172.17.0.5:8080" },
    });
    expect(seen).toEqual(["known w3", "addressed w3", "addressed w3"]);
  });

  it("tells a promotion, a drain (once) and an end, with how a worker died", async () => {
    const { engine, seen } = await engineWithLog();
    engine.manageWorker("w4", "ep1", { standby: true });
    engine.promote("w4");
    engine.promote("w4");
    engine.drain("w4");
    engine.drain("w4");
    engine.workerGone("w4", "exit code 137");
    engine.workerGone("w4");
    expect(seen).toEqual(["known w4", "promoted w4", "draining w4", "gone w4 (exit code 137)"]);
    expect(engine.workers.has("w4")).toBe(false);
  });

  it("a listener that throws is reported, and the others still hear the event", () => {
    const reported: string[] = [];
    const events = new WorkerEvents((event, err) => reported.push(`${event}: ${errorMessage(err)}`));
    const heard: string[] = [];
    events.on("gone", () => {
      throw new Error("listener broke");
    });
    const off = events.on("gone", ({ worker }) => heard.push(worker.id));
    const worker = { id: "w5" } as Parameters<Parameters<typeof events.on<"gone">>[1]>[0]["worker"];
    events.emit("gone", { worker });
    off();
    events.emit("gone", { worker });
    expect(reported).toEqual(["gone: listener broke", "gone: listener broke"]);
    expect(heard).toEqual(["w5"]);
  });
});
