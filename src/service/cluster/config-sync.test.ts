import { describe, expect, it } from "vitest";
import { planEndpointSync, startConfigSync } from "./config-sync.js";
import { EndpointRegistry } from "../endpoints/registry.js";
import type { EndpointRow } from "../store/types.js";

const row = (id: string, over: Partial<EndpointRow> = {}): EndpointRow =>
  ({
    id,
    userId: "u",
    app: "a",
    env: "e",
    name: id,
    type: "queue",
    resource: { functions: [] },
    artifactPath: "",
    revision: "r1",
    createdAt: 1,
    updatedAt: 1,
    completed: 0,
    failed: 0,
    retried: 0,
    ...over,
  }) as EndpointRow;

describe("planEndpointSync", () => {
  it("upserts new and changed rows, removes rows the store no longer has, and leaves the rest", () => {
    const current = new Map([
      ["same", row("same", { completed: 9 })],
      ["changed", row("changed")],
      ["gone", row("gone")],
    ]);
    const stored = [row("same"), row("changed", { revision: "r2", updatedAt: 2 }), row("new")];
    const plan = planEndpointSync(current, stored);
    expect(plan.upsert.map((r) => r.id)).toEqual(["changed", "new"]);
    expect(plan.remove).toEqual(["gone"]);
  });
});

describe("startConfigSync", () => {
  it("does not bring back an endpoint this replica removed while its deletion had not committed yet", async () => {
    const registry = new EndpointRegistry({ endpoints: new Map() });
    registry.upsert(row("kept"));
    registry.upsert(row("deleted"));
    // The store still has the row until this replica's pending batch commits.
    let stored = [row("kept"), row("deleted")];
    let commit!: () => void;
    const pending = new Promise<void>((resolve) => (commit = resolve)).then(() => {
      stored = stored.filter((r) => r.id !== "deleted");
    });
    const sync = startConfigSync({
      endpoints: registry,
      storedEndpoints: async () => stored,
      localWritesSettled: () => pending,
      reload: async () => undefined,
      dropped: async () => undefined,
      intervalMs: 60_000,
    });
    registry.remove("deleted");
    // A notice from another replica starts a round before the deletion commits.
    const round = sync.round();
    commit();
    await round;
    await sync.stop();
    expect([...registry.keys()]).toEqual(["kept"]);
  });
});
