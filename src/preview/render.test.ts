import { describe, expect, it } from "vitest";
import { type Manifest, type ManifestResource, reachablePeerUrl } from "svc/internal";
import { checkPreviewFlags } from "../cli/commands/deploy.js";
import { UsageError } from "../errors.js";
import { lbCurl, localEndpoints } from "../deploy/access.js";
import { endpointTable } from "../cli/output.js";
import { prefixLine, previewManifest, staleSessions } from "./render.js";

function resource(over: Partial<ManifestResource> = {}): ManifestResource {
  return {
    is_load_balanced: false,
    imageName: "svc-worker-cpu:0.1.0",
    workersMin: 0,
    workersMax: 3,
    gpuIds: "",
    env: {},
    functions: [{ name: "echo", module: "src/echo.ts", export: "echo", kind: "function" }],
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: [],
    dependencies: [],
    idleTimeout: 5,
    executionTimeoutMs: 600_000,
    maxConcurrency: 1,
    retries: 0,
    volume: null,
    handler: "endpoints/x/handler.mjs",
    ...over,
  };
}

const manifest: Manifest = {
  version: 1,
  app: "shop",
  fingerprint: "f",
  svcVersion: "0.1.0",
  resources: {
    echo: resource(),
    pinned: resource({ workersMin: 2, workersMax: 2 }),
    none: resource({ workersMin: 0, workersMax: 0 }),
    api: resource({ is_load_balanced: true, functions: [] }),
  },
  routes: { api: { "POST /echo": "echo", "GET /items/:id": "item" } },
  excluded: [],
};

describe("previewManifest", () => {
  it("gives every endpoint one container from the start, keeps larger minimums, and never a max below the min", () => {
    const m = previewManifest(manifest);
    expect(m.resources.echo).toMatchObject({ workersMin: 1, workersMax: 3 });
    expect(m.resources.pinned).toMatchObject({ workersMin: 2, workersMax: 2 });
    expect(m.resources.none).toMatchObject({ workersMin: 1, workersMax: 1 });
    expect(manifest.resources.echo!.workersMin).toBe(0); // the build's manifest is not changed
  });
});

describe("addresses, curls and the table", () => {
  const deployed = [
    { id: "aa11", name: "api", type: "lb" as const, url: "http://127.0.0.1:8700/v2/aa11" },
    { id: "bb22", name: "echo", type: "queue" as const, url: "http://127.0.0.1:8700/v2/bb22" },
  ];

  it("gives load-balanced endpoints their /lb address with a GET route's curl, queue ones their job API with a runsync curl", () => {
    const [api, echo] = localEndpoints(deployed, manifest, "http://127.0.0.1:8700", "KEY");
    expect(api).toEqual({
      name: "api",
      id: "aa11",
      type: "lb",
      url: "http://127.0.0.1:8700/lb/aa11",
      functions: [],
      routes: ["GET /items/:id", "POST /echo"],
      curl: 'curl -s -X GET http://127.0.0.1:8700/lb/aa11/items/1 -H "Authorization: Bearer KEY"',
    });
    expect(echo!.url).toBe("http://127.0.0.1:8700/v2/bb22");
    expect(echo!.functions).toEqual(["echo"]);
    expect(echo!.curl).toBe(
      `curl -s -X POST http://127.0.0.1:8700/v2/bb22/runsync -H "Authorization: Bearer KEY" -H "Content-Type: application/json" -d '{"input":{}}'`,
    );
  });

  it("sends a JSON body when the only route takes one", () => {
    expect(lbCurl("http://h/lb/x", ["POST /echo"], "$SVC_API_KEY")).toBe(
      `curl -s -X POST http://h/lb/x/echo -H "Authorization: Bearer $SVC_API_KEY" -H "Content-Type: application/json" -d '{}'`,
    );
  });

  it("prints one aligned row per endpoint, each followed by its curl", () => {
    const table = endpointTable(localEndpoints(deployed, manifest, "http://127.0.0.1:8700", "KEY")).split("\n");
    expect(table[0]).toBe("ENDPOINT  TYPE           URL                            SERVES");
    expect(table[1]).toBe("api       load-balanced  http://127.0.0.1:8700/lb/aa11  GET /items/:id, POST /echo");
    expect(table[2]).toMatch(/^ {2}curl -s -X GET /);
    expect(table[3]).toBe("echo      queue          http://127.0.0.1:8700/v2/bb22  echo");
    expect(table[4]).toMatch(/^ {2}curl -s -X POST .*\/v2\/bb22\/runsync/);
  });

  it("prefixes worker output with the endpoint name at one width", () => {
    expect(prefixLine("api", 7, "hello")).toBe("api     | hello");
    expect(prefixLine("counter", 7, "hi")).toBe("counter | hi");
  });
});

describe("staleSessions", () => {
  const labels = (session: string, pid: number | string, host = "box") => ({
    labels: { "svc.managed": "true", "svc.session": session, "svc.preview": "true", "svc.preview.pid": String(pid), "svc.preview.host": host },
  });
  const self = { hostname: "box", isAlive: (pid: number) => pid === 100 };

  it("selects sessions whose owner process on this host is gone, once each", () => {
    expect(staleSessions([labels("s-dead", 200), labels("s-dead", 200), labels("s-live", 100), labels("s-other", 300)], self)).toEqual(["s-dead", "s-other"]);
  });

  it("never selects another host's previews, objects without an owner pid, or objects that are not previews", () => {
    expect(staleSessions([labels("s-remote", 200, "elsewhere")], self)).toEqual([]);
    expect(staleSessions([labels("s-nopid", "")], self)).toEqual([]);
    expect(staleSessions([{ labels: { "svc.managed": "true", "svc.session": "s-test", "svc.preview.pid": "200", "svc.preview.host": "box" } }], self)).toEqual(
      [],
    );
    expect(staleSessions([{ labels: undefined }], self)).toEqual([]);
  });
});

describe("cross-endpoint calls from a container", () => {
  it("call a peer the service names on its loopback at the address the worker reached the service at", () => {
    expect(reachablePeerUrl("http://svc-api:40123", "http://127.0.0.1:8700/v2/abc")).toBe("http://svc-api:40123/v2/abc");
    expect(reachablePeerUrl("http://svc-api:40123/", "http://localhost:8700/v2/abc")).toBe("http://svc-api:40123/v2/abc");
  });

  it("keep the peer's address otherwise (a process worker on the host, a public service)", () => {
    expect(reachablePeerUrl("http://127.0.0.1:8700", "http://127.0.0.1:8700/v2/abc")).toBe("http://127.0.0.1:8700/v2/abc");
    expect(reachablePeerUrl("http://svc-api:40123", "https://svc.example.com/v2/abc")).toBe("https://svc.example.com/v2/abc");
  });
});

describe("svc deploy flags", () => {
  it("refuses --env and --dry-run with --preview, and the preview-only flags without it", () => {
    expect(() => checkPreviewFlags({ preview: true, env: "prod" })).toThrow(UsageError);
    expect(() => checkPreviewFlags({ preview: true, dryRun: true })).toThrow(/--dry-run/);
    expect(() => checkPreviewFlags({ port: "8700" })).toThrow(/--port goes with --preview/);
    expect(() => checkPreviewFlags({ allowCpuFallback: true })).toThrow(UsageError);
    expect(() => checkPreviewFlags({ preview: true, port: "0", allowCpuFallback: true, app: "x" })).not.toThrow();
    expect(() => checkPreviewFlags({ env: "prod" })).not.toThrow();
  });
});
