import { describe, expect, it } from "vitest";
import { nodeModelCacheUnused } from "./node-models.js";

describe("nodeModelCacheUnused", () => {
  it("says a node cache set for process or Docker workers is not used, and nothing where it applies or is unset", () => {
    expect(nodeModelCacheUnused("docker", "/var/lib/svc/models")).toBe(
      "SVC_NODE_MODEL_CACHE (/var/lib/svc/models) is for Swarm and Kubernetes nodes only; docker workers read the models from this host's cache (<data dir>/models)",
    );
    expect(nodeModelCacheUnused("process", "/m")).toMatch(/^SVC_NODE_MODEL_CACHE \(\/m\) is for Swarm and Kubernetes nodes only; process workers/);
    expect(nodeModelCacheUnused("swarm", "/m")).toBeUndefined();
    expect(nodeModelCacheUnused("kubernetes", "/m")).toBeUndefined();
    expect(nodeModelCacheUnused("docker", undefined)).toBeUndefined();
  });
});
