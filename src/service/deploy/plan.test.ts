import { describe, expect, it } from "vitest";
import type { Manifest, ManifestResource } from "svc/internal";
import type { EndpointRow } from "../store/types.js";
import { planActivation, planConfigUpdate } from "./plan.js";
import type { BuildRow } from "../store/deploy-rows.js";

function resource(overrides: Partial<ManifestResource> = {}): ManifestResource {
  return {
    is_load_balanced: false,
    imageName: "svc-worker-cpu:0.1.0",
    workersMin: 0,
    workersMax: 2,
    gpuIds: "",
    env: {},
    functions: [{ name: "f", module: "src/a.ts", export: "f", kind: "function" }],
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: ["cpu3c-1-2"],
    dependencies: [],
    idleTimeout: 5,
    executionTimeoutMs: 600_000,
    maxConcurrency: 1,
    retries: 1,
    volume: null,
    handler: "endpoints/a/handler.mjs",
    ...overrides,
  };
}

function build(id: string, fingerprint: string, resources: Record<string, ManifestResource>, routes: Manifest["routes"] = {}): BuildRow {
  const manifest: Manifest = { version: 1, app: "shop", fingerprint, svcVersion: "0.1.0", resources, routes, excluded: [] };
  return { id: id.repeat(64).slice(0, 64), userId: "u", app: "shop", size: 1, fingerprint, manifest, path: `/a/${id}.tar.gz`, createdAt: 0 };
}

const target = { userId: "u", app: "shop", env: "prod" };

function activate(existing: EndpointRow[], next: BuildRow, current?: BuildRow) {
  return planActivation(existing, { ...target, build: next, current, artifactPath: next.path }, 1000);
}

describe("planActivation", () => {
  it("creates every endpoint of a first build, with routes of load-balanced ones", () => {
    const b = build("a", "fp1", { a: resource(), web: resource({ is_load_balanced: true, functions: [] }) }, { web: { "GET /x": "x", "POST /y": "y" } });
    const plan = activate([], b);
    expect(plan.endpoints.map((e) => [e.name, e.type, e.action, e.routes])).toEqual([
      ["a", "queue", "create", []],
      ["web", "lb", "create", ["GET /x", "POST /y"]],
    ]);
    expect(plan.upsert).toHaveLength(2);
    expect(plan.remove).toEqual([]);
  });

  it("same sources and configuration: unchanged even when the artifact bytes differ; rows are not rewritten", () => {
    const first = build("a", "fp1", { a: resource() });
    const rows = activate([], first).upsert;
    const rebuilt = build("b", "fp1", { a: resource() });
    const plan = activate(rows, rebuilt, first);
    expect(plan.endpoints.map((e) => e.action)).toEqual(["unchanged"]);
    expect(plan.upsert).toEqual([]);
  });

  it("changed sources update (new revision, same id); endpoints that left are removed", () => {
    const first = build("a", "fp1", { a: resource(), old: resource() });
    const rows = activate([], first).upsert;
    const next = build("b", "fp2", { a: resource() });
    const plan = activate(rows, next, first);
    expect(plan.endpoints.map((e) => [e.name, e.action])).toEqual([["a", "update"]]);
    expect(plan.upsert[0]!.id).toBe(rows.find((r) => r.name === "a")!.id);
    expect(plan.upsert[0]!.revision).not.toBe(rows.find((r) => r.name === "a")!.revision);
    expect(plan.remove.map((r) => r.name)).toEqual(["old"]);
  });

  it("same sources but changed configuration updates that endpoint only", () => {
    const first = build("a", "fp1", { a: resource(), b: resource() });
    const rows = activate([], first).upsert;
    const plan = activate(rows, build("b", "fp1", { a: resource({ workersMax: 5 }), b: resource() }), first);
    expect(plan.endpoints.map((e) => [e.name, e.action])).toEqual([
      ["a", "update"],
      ["b", "unchanged"],
    ]);
  });

  it("another environment's endpoints are never touched", () => {
    const rows = activate([], build("a", "fp1", { a: resource() })).upsert.map((r) => ({ ...r, env: "staging" }));
    const plan = activate(rows, build("a", "fp1", { b: resource() }));
    expect(plan.remove).toEqual([]);
  });
});

describe("planConfigUpdate", () => {
  const rows = activate([], build("a", "fp1", { a: resource(), b: resource() })).upsert;

  it("GPU or worker-count changes restart workers (new revision); env and idle timeout do not", () => {
    const plan = planConfigUpdate(rows, { a: resource({ workersMax: 4, gpuTypeIds: ["ADA_24"] }), b: resource({ env: { K: "v" }, idleTimeout: 30 }) }, 2000);
    expect(plan.problems).toEqual([]);
    expect(plan.changes).toEqual([
      { name: "a", id: rows[0]!.id, changed: ["workersMax", "gpuTypeIds"], restart: true },
      { name: "b", id: rows[1]!.id, changed: ["env", "idleTimeout"], restart: false },
    ]);
    expect(plan.rows[0]!.revision).not.toBe(rows[0]!.revision);
    expect(plan.rows[0]!.resource.workersMax).toBe(4);
    expect(plan.rows[1]!.revision).toBe(rows[1]!.revision);
    expect(plan.rows[1]!.resource.env).toEqual({ K: "v" });
  });

  it("gpuCount is a restart change; a deployed manifest without it reads as one GPU, not a change", () => {
    const gpu = (o: Partial<ManifestResource> = {}) =>
      resource({ computeType: "GPU", gpuTypeIds: ["HOPPER_141"], gpuIds: "HOPPER_141", instanceIds: [], ...o });
    const deployed = activate([], build("g", "fp1", { a: gpu() })).upsert;
    expect(planConfigUpdate(deployed, { a: gpu({ gpuCount: 1 }) }, 2000).changes).toEqual([]);
    const plan = planConfigUpdate(deployed, { a: gpu({ gpuCount: 2 }) }, 2000);
    expect(plan.changes).toEqual([{ name: "a", id: deployed[0]!.id, changed: ["gpuCount"], restart: true }]);
    expect(plan.rows[0]!.resource.gpuCount).toBe(2);
  });

  it("no change: nothing to write", () => {
    expect(planConfigUpdate(rows, { a: resource(), b: resource() }, 2000)).toEqual({ changes: [], rows: [], problems: [] });
  });

  it("code changes beyond configuration are problems (they need svc deploy)", () => {
    const plan = planConfigUpdate(
      rows,
      { a: resource({ functions: [{ name: "g", module: "src/a.ts", export: "g", kind: "function" }] }), c: resource() },
      2000,
    );
    expect(plan.problems).toEqual([
      'endpoint "a" serves other functions in the code than deployed',
      'endpoint "c" is in the code but not deployed',
      'endpoint "b" is deployed but no longer in the code',
    ]);
  });

  it("compares a load-balanced endpoint's route handlers, unless it was deployed before manifests listed them", () => {
    const handler = (name: string) => ({ name, module: "src/api.ts", export: "api", kind: "function" as const });
    const listed = activate([], build("w", "fp1", { web: resource({ is_load_balanced: true, functions: [handler("list"), handler("show")] }) })).upsert;
    const same = resource({ is_load_balanced: true, functions: [handler("list"), handler("show")], workersMax: 5 });
    expect(planConfigUpdate(listed, { web: same }, 2000).problems).toEqual([]);
    const renamed = resource({ is_load_balanced: true, functions: [handler("list"), handler("create")] });
    expect(planConfigUpdate(listed, { web: renamed }, 2000).problems).toEqual(['endpoint "web" serves other functions in the code than deployed']);
    const legacy = activate([], build("w", "fp1", { web: resource({ is_load_balanced: true, functions: [] }) })).upsert;
    const plan = planConfigUpdate(legacy, { web: same }, 2000);
    expect(plan.problems).toEqual([]);
    expect(plan.changes.map((c) => c.changed)).toEqual([["workersMax"]]);
  });
});
