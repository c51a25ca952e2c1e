// The layer check (scripts/check-layers.mjs, run by `npm test`): the tree as it is passes, and an import that
// points up the layers (or makes two folders of the service import each other), planted in a copy of the sources,
// fails the check with a line naming the file, what it imports and the rule it breaks. The rules one by one on
// small import graphs.

import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain script, without type declarations
import { folderCycles, importCycles, layerViolations, upwardImports } from "../../scripts/check-layers.mjs";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = join(REPO, "scripts/check-layers.mjs");

type Dep = { target: string; dynamic?: boolean; typeOnly?: boolean };
const graphOf = (edges: Record<string, Array<string | Dep>>) =>
  new Map(
    Object.entries(edges).map(([file, deps]) => [
      file,
      deps.map((d) => (typeof d === "string" ? { target: d, dynamic: false, typeOnly: false } : { dynamic: false, typeOnly: false, ...d })),
    ]),
  );
const broken = (edges: Record<string, Array<string | Dep>>) =>
  (layerViolations(graphOf(edges)) as Array<{ file: string; target: string; rule: string }>).map((v) => `${v.file} -> ${v.target}: ${v.rule}`);

function check(root: string) {
  const run = spawnSync(process.execPath, [SCRIPT, root], { encoding: "utf8" });
  return { status: run.status, out: run.stdout, err: run.stderr };
}

describe("the layer check on the sources", () => {
  const copies: string[] = [];
  afterAll(() => copies.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  function copyOfSources(): string {
    const dir = mkdtempSync(join(tmpdir(), "svc-layers-"));
    copies.push(dir);
    cpSync(join(REPO, "src"), join(dir, "src"), { recursive: true });
    return dir;
  }

  it("passes on the tree as it is", () => {
    const { status, out, err } = check(REPO);
    expect(err).toBe("");
    expect(status).toBe(0);
    expect(out).toMatch(/every layer rule holds, no import cycle; src\/service: \d+ upward imports, \d+ folder pairs importing each other \(\d+ allowed\)/);
  });

  it("fails on a file under src/ over 600 lines, naming it and its length", () => {
    const root = copyOfSources();
    appendFileSync(join(root, "src/service/engine/clock.ts"), "\n// planted\n".repeat(400));
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toMatch(/src\/service\/engine\/clock\.ts has \d+ lines, over 600: split it along its seams/);
  });

  it("fails when the store imports a feature, naming the file, the import and the rule", () => {
    const root = copyOfSources();
    appendFileSync(
      join(root, "src/service/store/sqlite.ts"),
      '\nimport { IDEMPOTENCY_MIGRATION } from "../idempotency/schema.js";\nexport const planted = IDEMPOTENCY_MIGRATION;\n',
    );
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toContain('src/service/store/sqlite.ts imports src/service/idempotency/schema.ts: breaks "store-is-the-floor"');
  });

  it("fails when two folders of the service import each other, even through files that form no cycle", () => {
    const root = copyOfSources();
    // volumes/ imports keys/ (keys/auth.ts); a new module of keys/ importing a type of volumes/ back, which nothing
    // imports, makes no cycle of files, but one of folders.
    writeFileSync(join(root, "src/service/keys/planted.ts"), 'import type { VolumesApi } from "../volumes/index.js";\nexport type Planted = VolumesApi;\n');
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toMatch(
      /folders src\/service\/keys\/ and src\/service\/volumes\/ import each other:\n {2}src\/service\/keys\/planted\.ts -> src\/service\/volumes\/index\.ts\n {2}src\/service\/volumes\/\S+ -> src\/service\/keys\/auth\.ts/,
    );
    expect(err).not.toMatch(/import cycle among/);
  });

  it("fails when the engine imports the HTTP layer, naming the file, the import and the rule", () => {
    const root = copyOfSources();
    appendFileSync(join(root, "src/service/engine/jobs.ts"), '\nimport { HttpProblem } from "../http/problems.js";\nexport const planted = HttpProblem;\n');
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toContain('src/service/engine/jobs.ts imports src/service/http/problems.ts: breaks "core-below-http"');
  });

  it("fails when a feature's routes import the dispatcher again (the old circle through api.ts)", () => {
    const root = copyOfSources();
    appendFileSync(join(root, "src/service/management/keys.ts"), '\nimport type { ApiContext } from "../api.js";\nexport type Planted = ApiContext;\n');
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toContain('src/service/management/keys.ts imports src/service/api.ts: breaks "rows-not-dispatcher"');
    expect(err).toMatch(/import cycle among \d+ modules \(type imports included\):\n(.*\n)*\s+src\/service\/api\.ts/);
  });
});

describe("the layer rules", () => {
  it("keep the core below the HTTP layer, the features' routes and the dispatcher", () => {
    expect(
      broken({
        "src/service/store/faults.ts": ["src/service/http/problems.ts"],
        "src/service/engine/jobs.ts": [{ target: "src/service/jobs/validate.ts", typeOnly: true }],
        "src/service/lb/index.ts": ["src/service/workers/routes.ts"],
        "src/service/secrets/store.ts": ["src/service/secrets/routes.ts"],
        "src/service/cluster/forward.ts": ["src/service/api-context.ts"],
        // The edge may import the core; the LB's own HTTP handlers may speak HTTP.
        "src/service/jobs/routes.ts": ["src/service/http/wire.ts", "src/service/engine/index.ts"],
        "src/service/lb/front.ts": ["src/service/http/problems.ts"],
      }),
    ).toEqual([
      "src/service/store/faults.ts -> src/service/http/problems.ts: store-is-the-floor",
      "src/service/store/faults.ts -> src/service/http/problems.ts: core-below-http",
      "src/service/engine/jobs.ts -> src/service/jobs/validate.ts: core-below-http",
      "src/service/lb/index.ts -> src/service/workers/routes.ts: core-below-http",
      "src/service/secrets/store.ts -> src/service/secrets/routes.ts: core-below-http",
      "src/service/cluster/forward.ts -> src/service/api-context.ts: core-below-http",
      "src/service/cluster/forward.ts -> src/service/api-context.ts: no-catch-all-context",
    ]);
  });

  it("keep the SDK, the packages, the drivers and the library off what sits above them; tests are exempt", () => {
    expect(
      broken({
        "src/sdk/endpoint.ts": ["src/service/engine/index.ts", "src/errors.ts"],
        "packages/svc/src/index.ts": ["src/errors.ts", "packages/svc/src/endpoint.ts"],
        "src/drivers/docker.ts": ["src/service/keys/auth.ts"],
        "src/deploy/index.ts": ["src/cli/output.ts"],
        "src/preview/render.test.ts": ["src/cli/output.ts"],
        "src/cli/main.ts": ["src/service/index.ts"],
      }),
    ).toEqual([
      "src/sdk/endpoint.ts -> src/service/engine/index.ts: sdk-alone",
      "packages/svc/src/index.ts -> src/errors.ts: package-alone",
      "src/drivers/docker.ts -> src/service/keys/auth.ts: drivers-below-service",
      "src/deploy/index.ts -> src/cli/output.ts: library-below-cli",
    ]);
  });

  it("keep the catch-all context to the dispatcher and the composition root: a feature's rows declare their own", () => {
    expect(
      broken({
        "src/service/deploy/routes.ts": [{ target: "src/service/api-context.ts", typeOnly: true }],
        "src/service/api.ts": [{ target: "src/service/api-context.ts", typeOnly: true }],
        "src/service/index.ts": [{ target: "src/service/api-context.ts", typeOnly: true }],
      }),
    ).toEqual(["src/service/deploy/routes.ts -> src/service/api-context.ts: no-catch-all-context"]);
  });

  it("let nothing in the service import its composition root, but for its option types", () => {
    expect(
      broken({
        "src/service/config.ts": [{ target: "src/service/index.ts", typeOnly: true }],
        "src/service/workers/scaler.ts": ["src/service/index.ts"],
      }),
    ).toEqual(["src/service/workers/scaler.ts -> src/service/index.ts: composition-root"]);
  });

  it("find cycles of type imports across folders, not between two files of one folder or through import()", () => {
    const cycles = importCycles(
      graphOf({
        "src/service/api.ts": ["src/service/management/index.ts"],
        "src/service/management/index.ts": ["src/service/management/keys.ts"],
        "src/service/management/keys.ts": [{ target: "src/service/api.ts", typeOnly: true }],
        "src/service/http/schema.ts": ["src/service/http/api-schemas.ts"],
        "src/service/http/api-schemas.ts": [{ target: "src/service/http/schema.ts", typeOnly: true }],
        "src/service/stores.ts": [{ target: "src/service/cluster/leader.ts", dynamic: true }],
        "src/service/cluster/leader.ts": ["src/service/stores.ts"],
      }),
    );
    expect(cycles).toEqual([["src/service/api.ts", "src/service/management/index.ts", "src/service/management/keys.ts"]]);
  });
});

describe("the folder-cycle check and the counts", () => {
  it("finds folders of the service that import each other, type imports included, but not tests or files outside a folder", () => {
    expect(
      folderCycles(
        graphOf({
          "src/service/jobs/routes.ts": ["src/service/webhooks/events.ts"],
          "src/service/webhooks/routes.ts": [{ target: "src/service/jobs/validate.ts", typeOnly: true }],
          "src/service/engine/index.ts": ["src/service/store/types.ts"],
          "src/service/store/types.test.ts": ["src/service/engine/index.ts"],
          "src/service/stores.ts": ["src/service/store/sqlite.ts"],
          "src/service/store/sqlite.ts": ["src/service/stores.ts"],
        }),
      ),
    ).toEqual([
      {
        folders: ["jobs", "webhooks"],
        imports: ["src/service/jobs/routes.ts -> src/service/webhooks/events.ts", "src/service/webhooks/routes.ts -> src/service/jobs/validate.ts"],
      },
    ]);
  });

  it("count an import up the service's tiers (store/, the core, the rest) once per pair of files", () => {
    expect(
      upwardImports(
        graphOf({
          "src/service/store/sqlite.ts": ["src/service/idempotency/schema.ts", "src/service/idempotency/schema.ts", "src/service/store/rows.ts"],
          "src/service/engine/types.ts": [{ target: "src/service/webhooks/events.ts", typeOnly: true }, "src/service/store/types.ts"],
          "src/service/jobs/routes.ts": ["src/service/engine/index.ts", "src/service/http/wire.ts"],
        }),
      ),
    ).toEqual(["src/service/engine/types.ts -> src/service/webhooks/events.ts", "src/service/store/sqlite.ts -> src/service/idempotency/schema.ts"]);
  });

  it("keep the store at the floor: it imports only store/ and src/errors.ts", () => {
    expect(
      broken({
        "src/service/store/open.ts": ["src/service/management/store.ts", "src/service/store/sqlite.ts", "src/errors.ts"],
        "src/service/store/postgres/index.ts": [{ target: "src/service/deploy/types.ts", typeOnly: true }],
        "src/service/store/sqlite.test.ts": ["src/service/schema/sqlite.ts"],
        "src/service/stores.ts": ["src/service/management/store.ts", "src/service/store/sqlite.ts"],
      }),
    ).toEqual([
      "src/service/store/open.ts -> src/service/management/store.ts: store-is-the-floor",
      "src/service/store/postgres/index.ts -> src/service/deploy/types.ts: store-is-the-floor",
    ]);
  });
});
