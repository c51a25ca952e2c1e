import { describe, expect, it } from "vitest";
import { planEndpointSync } from "./config-sync.js";
import type { EndpointRow } from "../store/types.js";

const row = (id: string, over: Partial<EndpointRow> = {}): EndpointRow =>
  ({ id, userId: "u", app: "a", env: "e", name: id, type: "queue", resource: {}, artifactPath: "", revision: "r1", createdAt: 1, updatedAt: 1, completed: 0, failed: 0, retried: 0, ...over }) as EndpointRow;

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
