import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import ts from "typescript";
import { UserError } from "../errors.js";
import { StaticEvaluator, type StaticIssue } from "./discover-static.js";
import { discover } from "./discover.js";
import { pathSlug } from "./discover-endpoints.js";
import type { DiscoveredEndpoint, DiscoveryResult } from "./discover-records.js";

const fixture = (name: string) => fileURLToPath(new URL(`../../fixtures/discovery/${name}`, import.meta.url));

/** One line per function: "name kind module#export:line" (+ class). */
function functionLines(endpoint: DiscoveredEndpoint): string[] {
  return endpoint.functions.map(
    (f) => `${f.name} ${f.kind} ${f.module}#${f.exportName}:${f.loc.line}${f.className ? ` class=${f.className}` : ""}${f.anonymous ? " anonymous" : ""}`,
  );
}

function byName(result: DiscoveryResult, name: string): DiscoveredEndpoint {
  const endpoint = result.endpoints.find((e) => e.name === name);
  if (!endpoint) throw new Error(`endpoint ${name} not found; have ${result.endpoints.map((e) => e.name).join(", ")}`);
  return endpoint;
}

async function discoveryError(root: string, options?: { ignore?: string[] }): Promise<UserError> {
  try {
    await discover(root, options);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return err as UserError;
  }
  throw new Error(`discover(${root}) did not fail`);
}

const tempDirs: string[] = [];
afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function tempCopy(name: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `svc-discovery-${name}-`));
  tempDirs.push(dir);
  await cp(fixture(name), dir, { recursive: true });
  return dir;
}

describe("discover: definition forms (fixtures/discovery/forms)", async () => {
  const result = await discover(fixture("forms"));

  it("finds every endpoint, sorted by name, and lists the scanned files", () => {
    expect(result.endpoints.map((e) => `${e.name}:${e.type}`)).toEqual([
      "api:lb",
      "chained:lb",
      "const-config:queue",
      "counter:queue",
      "cpu-arrow:queue",
      "default-fn:queue",
      "embedder:queue",
      "export-first:queue",
      "gpu-worker:queue",
      "later-export:queue",
      "llm:queue",
      "shared-gpu:queue",
    ]);
    expect(result.files).toContain("src/plain.ts");
    expect(result.files).toEqual([...result.files].sort());
    expect(result.root).toBe(fixture("forms"));
  });

  it("Endpoint({...})(async function name) with its raw and normalized config", () => {
    const gpu = byName(result, "gpu-worker");
    expect(functionLines(gpu)).toEqual(["upscale function src/upscale.ts#upscale:4"]);
    expect(gpu.rawConfig).toEqual({
      name: "gpu-worker",
      gpu: ["ADA_24", "AMPERE_48"],
      workers: [0, 3],
      dependencies: ["sharp@^0.34"],
    });
    expect(gpu.config).toMatchObject({
      computeType: "GPU",
      gpuTypeIds: ["ADA_24", "AMPERE_48"],
      instanceIds: [],
      workersMin: 0,
      workersMax: 3,
      dependencies: ["sharp@^0.34"],
      idleTimeout: 60,
      executionTimeoutMs: 600_000,
    });
    expect(gpu.definedAt).toMatchObject({ file: "src/upscale.ts", line: 3 });
    expect(gpu.routes).toEqual([]);
  });

  it("generators, arrows, identifiers of declared functions and default exports", () => {
    expect(functionLines(byName(result, "llm"))).toEqual(["tokens generator src/stream.ts#tokens:3"]);
    expect(functionLines(byName(result, "cpu-arrow"))).toEqual(["shout function src/arrow.ts#shout:3 anonymous"]);
    expect(byName(result, "cpu-arrow").config).toMatchObject({ computeType: "CPU", instanceIds: ["cpu3c-2-4"] });
    // the function's own name wins over the export name; function* -> generator
    expect(functionLines(byName(result, "counter"))).toEqual(["countUp generator src/counter.ts#counter:7"]);
    expect(byName(result, "counter").config).toMatchObject({ workersMin: 0, workersMax: 2 });
    expect(functionLines(byName(result, "default-fn"))).toEqual(["default function src/default-export.ts#default:3 anonymous"]);
  });

  it("a reusable decorator applied to functions and a class; warns about the anonymous one", () => {
    const shared = byName(result, "shared-gpu");
    expect(functionLines(shared)).toEqual([
      "b function src/reusable.ts#b:8 anonymous",
      "clean method src/reusable.ts#Tools:12 class=Tools",
      "embedA function src/reusable.ts#a:5",
    ]);
    expect(shared.definedAt).toMatchObject({ file: "src/reusable.ts", line: 3 });
    expect(Object.keys(shared.config.env)).toEqual(["ALPHA", "ZED"]);
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toMatch(/^src\/reusable\.ts:8: endpoint "shared-gpu" has 3 functions and "b" is an anonymous function/);
    expect(result.warnings[0]).toContain("use a named function");
  });

  it("class endpoints serve only public instance methods", () => {
    expect(functionLines(byName(result, "embedder"))).toEqual([
      "embed method src/embedder.ts#Embedder:8 class=Embedder",
      "streamEmbed generator-method src/embedder.ts#Embedder:11 class=Embedder",
    ]);
    expect(functionLines(byName(result, "export-first"))).toEqual(["run method src/export-first.ts#Late:4 class=Late"]);
    // `@Endpoint(...) class Worker {}` + `export { Worker as PublicWorker }`
    expect(functionLines(byName(result, "later-export"))).toEqual(["work method src/later-export.ts#PublicWorker:5 class=Worker"]);
  });

  it("a const config object shared by several Endpoint calls is one site", () => {
    const endpoint = byName(result, "const-config");
    expect(functionLines(endpoint)).toEqual(["first function src/const-config.ts#first:13", "second function src/const-config.ts#second:16"]);
    expect(endpoint.definedAt).toMatchObject({ file: "src/const-config.ts", line: 5 });
    expect(endpoint.rawConfig).toEqual({
      name: "const-config",
      gpu: ["ADA_24", "AMPERE_48"],
      workers: [1, 4],
      env: { MODE: "fast" },
      executionTimeout: 120,
    });
    expect(endpoint.config).toMatchObject({ workersMin: 1, workersMax: 4, executionTimeoutMs: 120_000 });
  });

  it("load-balanced endpoints: routes, names, cross-file routes, export", () => {
    const api = byName(result, "api");
    expect(api.functions).toEqual([]);
    expect(api.lbExport).toEqual({ module: "src/api.ts", exportName: "api" });
    expect(api.config).toMatchObject({ workersMin: 1, workersMax: 3, instanceIds: ["cpu3c-1-2"] });
    expect(api.routes.map((r) => `${r.method} ${r.path} ${r.name} ${r.loc.file}:${r.loc.line}`)).toEqual([
      "GET /items/:id handler src/api.ts:13",
      "GET /status get_status src/api.ts:12",
      "PATCH / patch_root src/more-routes.ts:9",
      "POST /process process src/api.ts:9",
      "PUT /items/:id handler_2 src/more-routes.ts:8",
    ]);
    const chained = byName(result, "chained");
    expect(chained.lbExport).toEqual({ module: "src/chained.ts", exportName: "chained" });
    expect(chained.routes.map((r) => `${r.method} ${r.path} ${r.name} ${r.loc.line}`)).toEqual([
      "DELETE /items/:id delete_items_id 6",
      "GET /a get_a 4",
      "POST /a post_a 5",
    ]);
  });

  it("is deterministic", async () => {
    const again = await discover(fixture("forms"));
    expect(JSON.stringify(again)).toBe(JSON.stringify(result));
  });
});

describe("discover: imports, aliases and re-exports (fixtures/discovery/aliases)", async () => {
  const result = await discover(fixture("aliases"));

  it("follows named, aliased, namespace, local re-export and chained imports of Endpoint", () => {
    expect(result.endpoints.map((e) => `${e.name} ${functionLines(e).join(", ")}`)).toEqual([
      "alias-named f1 function src/alias.ts#f1:3",
      "alias-namespace f2 function src/namespace.ts#f2:3",
      "cjs-style legacy function src/legacy.cjs#legacy:3",
      "mts-module numbers generator src/module.mts#numbers:3",
      "shared-cpu crop function src/uses-shared.ts#crop:8, resizeImage function src/uses-shared.ts#resize:7",
      "tsx-render render function src/component.tsx#render:5",
      "via-chain f6 function src/via-chain.ts#f6:3",
      "via-local-namespace f7 function src/via-namespace-local.ts#f7:3",
      "via-local-reexport f5 function src/via-local.ts#f5:3",
      "via-reexport-alias f3 function src/via-sdk.ts#f3:3",
      "via-star f4 function src/via-star.ts#f4:3",
    ]);
  });

  it("a decorator imported from another file keeps its config site", () => {
    expect(byName(result, "shared-cpu").definedAt).toMatchObject({ file: "src/shared-decorator.ts", line: 3 });
  });

  it("ignores look-alikes: a local Endpoint function, another package", () => {
    const names = result.endpoints.map((e) => e.name);
    expect(names).not.toContain("not-svc");
    expect(names).not.toContain("other-package");
    expect(result.files).toContain("src/not-svc.ts");
  });
});

describe("discover: less common forms (fixtures/discovery/more-forms)", async () => {
  const result = await discover(fixture("more-forms"));

  it("alias const of Endpoint, default-exported decorated class, classes passed to a decorator, renamed exports", () => {
    expect(result.endpoints.map((e) => `${e.name} ${functionLines(e).join(", ")}`)).toEqual([
      "applied-class embed method src/classes.ts#Emb:14 class=Embedder",
      "class-expr go method src/classes.ts#Anon:16 class=Anon",
      // overload signatures are not separate functions
      "default-class run method src/classes.ts#default:10 class=Foo",
      "renamed default2 function src/classes.ts#default2:18 anonymous",
      "web ",
    ]);
  });

  it("routes added through a namespace import of the module that exports the endpoint", () => {
    const web = byName(result, "web");
    expect(web.type).toBe("lb");
    expect(web.lbExport).toEqual({ module: "src/web.ts", exportName: "web" });
    expect(web.routes).toEqual([{ method: "GET", path: "/x", name: "get_x", loc: { file: "src/routes-via-namespace.ts", line: 2, column: 10 } }]);
  });
});

describe("discover: ignores", () => {
  it("honours built-in ignores, root and nested .gitignore files, and options.ignore", async () => {
    const root = await tempCopy("ignores");
    // Directories that git would not keep in the fixture: each defines endpoint "kept" again.
    const duplicate = 'import { Endpoint } from "svc";\nexport const again = Endpoint({ name: "kept" })(async function again() {});\n';
    for (const dir of ["node_modules/pkg", "dist", "build", "coverage", ".svc/.build", ".git/hooks"]) {
      await mkdir(path.join(root, dir), { recursive: true });
      await writeFile(path.join(root, dir, "index.ts"), duplicate);
    }

    // src/extra/extra.ts is not ignored by default: a second "kept" config site.
    const err = await discoveryError(root);
    expect(err.problems).toEqual([
      expect.stringMatching(
        /^src\/main\.ts:3: the configuration of endpoint "kept" is defined in more than one place \(also at src\/extra\/extra\.ts:3\)\. Fix: define it once/,
      ),
    ]);

    const result = await discover(root, { ignore: ["src/extra/"] });
    expect(result.files).toEqual(["src/main.ts", "src/nested/kept-too.ts"]);
    expect(result.endpoints.map((e) => e.name)).toEqual(["kept"]);
    expect(functionLines(result.endpoints[0]!)).toEqual(["kept function src/main.ts#kept:3"]);
  });

  it("explains what was searched when everything is ignored", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "svc-discovery-all-ignored-"));
    tempDirs.push(root);
    await mkdir(path.join(root, "tests"), { recursive: true });
    await writeFile(path.join(root, "tests", "fn.ts"), 'import { Endpoint } from "svc";\nexport const f = Endpoint({ name: "f" })(async function f() {});\n');
    const err = await discoveryError(root);
    expect(err.message).toMatch(/^No endpoint functions found in /);
    expect(err.message).toContain("scanned 0 files");
    expect(err.message).toContain("tests/");
  });
});

describe("discover: no endpoints (fixtures/discovery/none)", () => {
  it("says what was searched and names the two common causes", async () => {
    const err = await discoveryError(fixture("none"));
    expect(err.message).toMatch(/^No endpoint functions found in /);
    expect(err.message).toContain(fixture("none"));
    expect(err.message).toContain("scanned 2 files matching **/*.{ts,tsx,mts,cts,js,mjs,cjs,jsx}");
    expect(err.message).toContain("node_modules/");
    expect(err.message).toContain(".gitignore rules");
    expect(err.hint).toContain("decorator syntax");
    expect(err.hint).toContain("second call");
    expect(err.hint).toContain('import Endpoint from "svc"');
    expect(err.hint).toContain("ignore patterns");
  });
});

describe("discover: every violation is reported (fixtures/discovery/errors)", async () => {
  const err = await discoveryError(fixture("errors"));

  const expected: Array<[string, string]> = [
    // statically unknown configuration, at the property's line
    ["src/dynamic-config.ts:9", 'configuration value "gpu" must be statically known (a literal or a const of this file), but it is "process.env.GPU"'],
    [
      "src/dynamic-config.ts:10",
      'configuration value "workers[1]" must be statically known (a literal or a const of this file), but it is a call (Number("3"))',
    ],
    ["src/dynamic-config.ts:11", 'configuration value "env.KEY" must be statically known'],
    ["src/dynamic-config.ts:12", "endpoint configuration must be statically known (a literal or a const of this file), but it is a spread (...base)"],
    [
      "src/dynamic-config.ts:13",
      'configuration value "volume" must be statically known (a literal or a const of this file), but it is a template literal with substitutions',
    ],
    ["src/dynamic-config.ts:14", 'configuration value "idleTimeout" must be statically known'],
    ["src/config-not-literal.ts:4", 'the configuration passed to Endpoint(...) must be statically known, but it is the variable "importedConfig"'],
    ["src/config-not-literal.ts:5", "the configuration passed to Endpoint(...) must be statically known, but it is a call (makeConfig())"],
    // configProblems(), at the offending key's line
    ["src/config-problems.ts:4", 'invalid endpoint configuration: "name" "Bad_Name" must be 1-63 lowercase letters'],
    ["src/config-problems.ts:5", 'invalid endpoint configuration: "gpu" and "cpu" are mutually exclusive'],
    ["src/config-problems.ts:7", 'invalid endpoint configuration: unknown configuration key "colour"'],
    ["src/config-problems.ts:8", 'invalid endpoint configuration: "workers" [min, max] needs 0 <= min <= max'],
    ["src/config-problems.ts:9", 'invalid endpoint configuration: "idleTimeout" must be an integer from 1 to 3600'],
    // structure
    ["src/twice-b.ts:3", 'the configuration of endpoint "twice" is defined in more than one place (also at src/twice-a.ts:3). Fix: define it once'],
    ["src/dup-functions.ts:6", 'endpoint "dup-fns" has two functions named "same" (the other at src/dup-functions.ts:5)'],
    [
      "src/mixed-use.ts:4",
      'endpoint "mixed-use" is used both as a queue endpoint (applied to a function or class here) and as a load-balanced endpoint (route at src/mixed-use.ts:5)',
    ],
    [
      "src/name-queue.ts:3",
      'endpoint name "shared-name" is used for both a load-balanced endpoint and a queue endpoint (load-balanced one at src/name-lb.ts:3)',
    ],
    ["src/bad-routes.ts:6", "route GET /ping uses the reserved path /ping"],
    ["src/bad-routes.ts:7", 'route path "relative" must start with "/"'],
    ["src/bad-routes.ts:9", 'route GET /dup is defined twice on endpoint "bad-routes" (the other at src/bad-routes.ts:8)'],
    ["src/bad-routes.ts:10", 'the path of route .put(...) must be a string literal, but it is the variable "dynamicPath"'],
    ["src/not-exported.ts:3", 'endpoint function "hidden" (endpoint "hidden-fn") is not exported; the generated handler must import it'],
    ["src/not-exported.ts:6", 'endpoint class "Hidden" (endpoint "hidden-class") is not exported'],
    ["src/not-exported.ts:10", 'load-balanced endpoint "hidden-lb" is not exported'],
    ["src/more-errors.ts:4", 'endpoint class "Empty" (endpoint "no-methods") has no public methods to serve'],
    [
      "src/more-errors.ts:12",
      'load-balanced endpoint "split-lb" gets routes on two different Endpoint(...) objects (the other created at src/more-errors.ts:10)',
    ],
    ["src/more-errors.ts:16", "route DELETE /items/:id has no handler"],
    ["src/more-errors.ts:19", 'endpoint "wrapped" is applied to a call (wrap(async function inner() {})), which is not a function the build can see'],
    ["src/more-errors.ts:21", "Endpoint() is called without a configuration"],
    ["src/never-applied.ts:3", 'Endpoint({ name: "never-applied" }) is never applied to a function or class, has no routes and names no image'],
  ];

  it("throws one UserError listing all problems, each 'file:line: what. Fix: how'", () => {
    expect(err.message).toBe(`Found ${expected.length} problems in endpoint definitions`);
    expect(err.hint).toContain("docs/endpoint-definitions.md");
    expect(err.problems).toHaveLength(expected.length);
    for (const problem of err.problems) expect(problem).toMatch(/^src\/[\w.-]+:\d+: .+\. Fix: .+/);
  });

  it.each(expected)("%s: %s", (location, text) => {
    const matches = err.problems.filter((p) => p.startsWith(`${location}: `) && p.includes(text));
    expect(matches, err.problems.join("\n")).toHaveLength(1);
  });

  it("lists problems in file and line order, the same every time", async () => {
    const again = await discoveryError(fixture("errors"));
    expect(again.problems).toEqual(err.problems);
    const keys = err.problems.map((p) => /^(.*?):(\d+):/.exec(p)!);
    const sorted = [...keys].sort((a, b) => (a[1]! < b[1]! ? -1 : a[1]! > b[1]! ? 1 : Number(a[2]) - Number(b[2])));
    expect(keys.map((k) => k[0])).toEqual(sorted.map((k) => k[0]));
  });
});

describe("pathSlug", () => {
  it("turns a route path into a name part", () => {
    expect(pathSlug("/process")).toBe("process");
    expect(pathSlug("/items/:id")).toBe("items_id");
    expect(pathSlug("/v1/chat-completions")).toBe("v1_chat_completions");
    expect(pathSlug("/")).toBe("root");
  });
});

describe("StaticEvaluator", () => {
  function evaluate(code: string) {
    const source = ts.createSourceFile("x.ts", code, ts.ScriptTarget.Latest, true);
    const consts = new Map<string, ts.Expression>();
    let last: ts.Expression | undefined;
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue;
      for (const d of statement.declarationList.declarations) {
        if (ts.isIdentifier(d.name) && d.initializer) {
          if (statement.declarationList.flags & ts.NodeFlags.Const) consts.set(d.name.text, d.initializer);
          last = d.initializer;
        }
      }
    }
    const issues: StaticIssue[] = [];
    const value = new StaticEvaluator(source, (name) => consts.get(name)).evaluate(last!, "", issues);
    return { value, issues: issues.map((i) => `${i.keyPath}: ${i.found}`) };
  }

  it("knows literals, negative numbers, templates without substitutions, wrappers and same-file consts", () => {
    expect(
      evaluate(
        `const N = 4; const L = ["a", "b"] as const; const v = { a: -1, b: +2, c: \`t\`, d: [true, false, null], e: L, f: N, g: ("x" satisfies string), "h-i": { j: N } };`,
      ),
    ).toEqual({
      value: { a: -1, b: 2, c: "t", d: [true, false, null], e: ["a", "b"], f: 4, g: "x", "h-i": { j: 4 } },
      issues: [],
    });
  });

  it("names every value it cannot know, with its key path", () => {
    const { issues } = evaluate(
      "let m = 1; const s = { x: 1 }; const v = { a: m, b: f(), c: [1, ...s2], ...s, [k]: 1, d: `${m}`, e: process.env.X, get g() { return 1; } };",
    );
    expect(issues).toEqual([
      'a: "m", which is not a constant with a literal value in this file',
      "b: a call (f())",
      "c[1]: a spread (...s2)",
      ": a spread (...s)",
      ": a computed property name",
      "d: a template literal with substitutions (`${m}`)",
      'e: "process.env.X"',
      "g: a method or accessor",
    ]);
  });
});

describe("discover: a scaling policy", () => {
  it("is read statically from Endpoint({ scaler }) and normalized", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "svc-discovery-scaler-"));
    tempDirs.push(dir);
    await mkdir(path.join(dir, "src"));
    await writeFile(path.join(dir, "package.json"), '{ "name": "scaler-app", "private": true, "type": "module" }');
    await writeFile(
      path.join(dir, "src", "model.ts"),
      'import { Endpoint } from "svc";\nconst DELAY = 4;\nexport const model = Endpoint({ name: "model", scaler: { type: "QUEUE_DELAY", value: DELAY } })(async function infer() {});\n',
    );
    const result = await discover(dir);
    expect(byName(result, "model").config.scaler).toEqual({ type: "QUEUE_DELAY", value: 4 });
  });
});
