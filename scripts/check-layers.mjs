#!/usr/bin/env node
// The layers of svc, checked on the sources (type-only imports count: a type import still ties one module's
// meaning to another's). Each rule names the modules it constrains and the modules they may not import, and why.
// Beside the rules: no import cycle among the sources, type imports included (scripts/check-cycles.mjs checks
// the compiled modules, whose cycles change load order), except type imports between two files of one folder
// (one concern in two files). Tests (*.test.ts) may import across layers to observe.
//
// Usage: node scripts/check-layers.mjs [repo root]   Exit 1 with one line per broken rule: the importing file, the
// imported file and the rule's name and reason.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { cyclesOf } from "./strongly-connected.mjs";

const SVC = "src/service/";
/** The service's core: its state and rules, which know nothing of HTTP (the edge maps their Refusals). */
const CORE = [
  `${SVC}engine/`,
  `${SVC}store/`,
  `${SVC}endpoints/`,
  `${SVC}cluster/`,
  `${SVC}keys/`,
  `${SVC}artifacts/store.ts`,
  `${SVC}management/store.ts`,
  `${SVC}management/datacenters.ts`,
  `${SVC}secrets/box.ts`,
  `${SVC}secrets/check.ts`,
  `${SVC}secrets/index.ts`,
  `${SVC}secrets/store.ts`,
  `${SVC}lb/index.ts`,
  `${SVC}lb/address.ts`,
  `${SVC}lb/balance.ts`,
  `${SVC}lb/ping.ts`,
  `${SVC}lb/head-scan.ts`,
];
/** What sits above the core: the HTTP layer, the features' routes, the dispatcher and the composition root. */
const EDGE = [`${SVC}http/`, `${SVC}jobs/`, `${SVC}workers/`, `${SVC}api.ts`, `${SVC}api-context.ts`, `${SVC}index.ts`, `${SVC}state-routes.ts`];
const ROUTE_FILE = /(^|\/|-)routes?\.ts$/;

const under = (prefixes) => (file) => prefixes.some((p) => (p.endsWith("/") ? file.startsWith(p) : file === p));
const inService = (file) => file.startsWith(SVC);
const PACKAGE = /^packages\/([^/]+)\//;

/**
 * Each rule: `from` the modules it constrains, `to` the imports they may not make (given the imported path, the
 * importing one and whether the import is of types only), `why`.
 */
export const RULES = [
  {
    name: "core-below-http",
    why: "the service's core (engine, store, endpoints, cluster, keys, secrets, management's store, the LB balancer) does not speak HTTP: it throws Refusal and the edge answers",
    from: under(CORE),
    to: (target) => under(EDGE)(target) || (inService(target) && ROUTE_FILE.test(target)),
  },
  {
    name: "rows-not-dispatcher",
    why: "features export their rows over their own dependencies; only the composition root (src/service/index.ts) imports the dispatcher",
    from: (file) => inService(file) && file !== `${SVC}index.ts`,
    to: (target) => target === `${SVC}api.ts`,
  },
  {
    name: "no-catch-all-context",
    why: "each feature declares the dependencies its rows use; the catch-all ApiContext is the dispatcher's and the composition root's alone",
    from: (file) => inService(file) && file !== `${SVC}index.ts` && file !== `${SVC}api.ts`,
    to: (target) => target === `${SVC}api-context.ts`,
  },
  {
    name: "composition-root",
    why: "src/service/index.ts wires the service; nothing inside the service imports it (its option types excepted)",
    from: inService,
    to: (target, _file, typeOnly) => target === `${SVC}index.ts` && !typeOnly,
  },
  {
    name: "sdk-alone",
    why: "the SDK is what users' code imports: it brings nothing of the CLI, the service, the drivers or the build",
    from: (file) => file.startsWith("src/sdk/"),
    to: (target) => /^src\/(cli|service|drivers|build|dev|preview|deploy|doctor)\//.test(target),
  },
  {
    name: "package-alone",
    why: "a workspace package imports other packages by name, never by a path out of its own folder",
    from: (file) => PACKAGE.test(file),
    to: (target, file) => !target.startsWith(`packages/${PACKAGE.exec(file)[1]}/`),
  },
  {
    name: "drivers-below-service",
    why: "drivers start and stop workers for the service; they do not reach into it",
    from: (file) => file.startsWith("src/drivers/"),
    to: (target) => target.startsWith(SVC),
  },
  {
    name: "library-below-cli",
    why: "the CLI is a thin layer over the library; the library never imports the CLI",
    from: (file) => !file.startsWith("src/cli/"),
    to: (target) => target.startsWith("src/cli/"),
  },
];

// Static imports and re-exports (type-only included), side-effect imports and dynamic import() of relative paths.
const IMPORT = /(?:^|[\s;])((?:import|export)\s[^;]*?)\sfrom\s*["'](\.{1,2}\/[^"']+)["']|(?:^|[\s;])import\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Whether an import or export clause brings types only (`import type {...}`, or every name marked `type`). */
function typeOnlyClause(clause) {
  if (/^(import|export)\s+type\s/.test(clause)) return true;
  const names = /\{([^}]*)\}/.exec(clause)?.[1];
  if (names === undefined || /^(import|export)\s+[\w$]+\s*,/.test(clause) || /\*/.test(clause)) return false;
  const list = names.split(",").map((n) => n.trim()).filter(Boolean);
  return list.length > 0 && list.every((n) => n.startsWith("type "));
}

function sourceFiles(root, dir) {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs).flatMap((name) => {
    const path = join(dir, name);
    if (name === "node_modules" || name === "dist" || name.startsWith(".")) return [];
    if (statSync(join(root, path)).isDirectory()) return sourceFiles(root, path);
    return /\.tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path.split(sep).join("/")] : [];
  });
}

/** A relative specifier of `file` as a repository path: "./x.js" is x.ts (or x.tsx, or x/index.ts). */
function resolveSpecifier(root, file, spec) {
  const base = join(dirname(file), spec).split(sep).join("/");
  const stem = base.replace(/\.(m?js|jsx)$/, "");
  for (const candidate of [`${stem}.ts`, `${stem}.tsx`, `${stem}/index.ts`, base]) {
    if (existsSync(join(root, candidate)) && statSync(join(root, candidate)).isFile()) return candidate;
  }
  return undefined;
}

/** The import graph of the repository's sources: file -> [{ target, dynamic, typeOnly }]. */
export function importGraph(root) {
  const files = [...sourceFiles(root, "src"), ...(existsSync(join(root, "packages")) ? readdirSync(join(root, "packages")).flatMap((p) => sourceFiles(root, `packages/${p}/src`)) : [])];
  const graph = new Map();
  for (const file of files) {
    const text = readFileSync(join(root, file), "utf8").replace(/\/\*[\s\S]*?\*\/|(^|[^:"'`])\/\/.*$/gm, "$1");
    const deps = [];
    for (const m of text.matchAll(IMPORT)) {
      const target = resolveSpecifier(root, file, m[2] ?? m[3] ?? m[4]);
      if (target && target !== file) deps.push({ target, dynamic: m[4] !== undefined, typeOnly: m[1] !== undefined && typeOnlyClause(m[1].trim()) });
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Every broken rule: { file, target, rule, why }. Tests are exempt. Pure. */
export function layerViolations(graph, rules = RULES) {
  const out = [];
  for (const [file, deps] of graph) {
    if (/\.test\.tsx?$/.test(file)) continue;
    for (const rule of rules) {
      if (!rule.from(file)) continue;
      for (const { target, typeOnly } of deps) if (rule.to(target, file, typeOnly === true)) out.push({ file, target, rule: rule.name, why: rule.why });
    }
  }
  return out;
}

/**
 * Import cycles among the sources over static imports, type-only ones included but for those between two files
 * of one folder; each cycle as its sorted files. Pure.
 */
export function importCycles(graph) {
  const sameFolder = (a, b) => dirname(a) === dirname(b);
  const edges = (v) =>
    (graph.get(v) ?? []).filter((d) => !d.dynamic && graph.has(d.target) && !(d.typeOnly && sameFolder(v, d.target))).map((d) => d.target);
  return cyclesOf(graph.keys(), edges).map((component) => component.sort());
}

/** The report for `root`: lines to print and whether the layers hold. */
export function checkLayers(root) {
  const graph = importGraph(root);
  const violations = layerViolations(graph);
  const cycles = importCycles(graph);
  const lines = [
    ...violations.map((v) => `${v.file} imports ${v.target}: breaks "${v.rule}" (${v.why})`),
    ...cycles.map((c) => `import cycle among ${c.length} modules (type imports included):\n${c.map((f) => `  ${f}`).join("\n")}`),
  ];
  return { ok: lines.length === 0, lines, modules: graph.size };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? ".");
  const { ok, lines, modules } = checkLayers(root);
  if (ok) {
    process.stdout.write(`check-layers: ${modules} modules, every layer rule holds, no import cycle\n`);
  } else {
    process.stderr.write(`${lines.join("\n")}\n`);
    process.exit(1);
  }
}
