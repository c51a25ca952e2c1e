import { describe, expect, it } from "vitest";
import type { EngineEndpoint } from "../engine/index.js";
import { EndpointRegistry, type EndpointChange } from "./registry.js";
import type { EndpointRow } from "../store/types.js";

const row = (revision: string, counters = { completed: 0, failed: 0, retried: 0 }): EndpointRow =>
  ({
    id: "e1",
    userId: "u",
    app: "a",
    env: "prod",
    name: "api",
    type: "queue",
    artifactPath: "",
    revision,
    createdAt: 1,
    updatedAt: 1,
    ...counters,
    resource: { retries: 2, executionTimeoutMs: 1000, maxConcurrency: 3, functions: [{ name: "f" }] },
  }) as unknown as EndpointRow;

describe("EndpointRegistry", () => {
  it("replaces a row keeping the service's counters, and keeps the engine's view in step", () => {
    const engine = { endpoints: new Map<string, EngineEndpoint>() };
    const registry = new EndpointRegistry(engine);
    registry.upsert(row("r1", { completed: 7, failed: 2, retried: 1 }));
    // A plan made from the store's older row: its counters are stale.
    const kept = registry.upsert(row("r2"));
    expect(kept).toMatchObject({ revision: "r2", completed: 7, failed: 2, retried: 1 });
    expect(registry.get("e1")).toBe(kept);
    expect(engine.endpoints.get("e1")).toMatchObject({ id: "e1", retries: 2, maxConcurrency: 3, functions: ["f"] });
    expect([...registry.values()].map((r) => r.revision)).toEqual(["r2"]);
    expect(registry.size).toBe(1);
  });

  it("tells its listeners what changed, until they unsubscribe", () => {
    const registry = new EndpointRegistry({ endpoints: new Map() });
    const heard: EndpointChange["type"][] = [];
    const off = registry.onChange((change) => heard.push(change.type));
    registry.upsert(row("r1"));
    expect(registry.remove("e1")?.id).toBe("e1");
    expect(registry.remove("e1")).toBeUndefined();
    off();
    registry.upsert(row("r2"));
    expect(heard).toEqual(["upsert", "remove"]);
    expect(registry.has("e1")).toBe(true);
  });
});
