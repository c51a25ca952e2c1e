#!/usr/bin/env node
// The layers of svc, checked on the sources (type-only imports count: a type import still ties one module's
// meaning to another's). Each rule names the modules it constrains and the modules they may not import, and why.
// Beside the rules: no import cycle among the sources, type imports included (scripts/check-cycles.mjs checks
// the compiled modules, whose cycles change load order), except type imports between two files of one folder
// (one concern in two files); and no two folders of src/service importing each other, even through different
// files (two features that need each other are one feature, or share something that belongs below both), but for
// the pairs named in FOLDER_PAIRS_ALLOWED with their reason. Tests (*.test.ts) may import across layers to observe.
//
// It also counts, for the service, the imports that point up its tiers (the floor, store/; the core; the rest)
// and the folder pairs that import each other, and prints both.
//
// Usage: node scripts/check-layers.mjs [repo root]   Exit 1 with one line per broken rule: the importing file, the
// imported file and the rule's name and reason.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { cyclesOf } from "./strongly-connected.mjs";

const SVC = "src/service/";
const STORE = `${SVC}store/`;
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
  `${SVC}lb/pool.ts`,
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
    name: "store-is-the-floor",
    why: "store/ is the floor of the service: it imports only store/ and src/errors.ts (and svc/internal); the features' migrations are passed to it and their stores are built on it",
    from: (file) => file.startsWith(STORE),
    to: (target) => !target.startsWith(STORE) && target !== "src/errors.ts",
  },
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
    name: "wire-is-a-leaf",
    why: "the worker protocols are defined once in src/wire/ for both sides: the runtime and the service import them, they import neither",
    from: (file) => file.startsWith("src/wire/"),
    to: (target) => target.startsWith("src/") && !target.startsWith("src/wire/") && target !== "src/errors.ts",
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
const IMPORT =
  /(?:^|[\s;])((?:import|export)\s[^;]*?)\sfrom\s*["'](\.{1,2}\/[^"']+)["']|(?:^|[\s;])import\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Whether an import or export clause brings types only (`import type {...}`, or every name marked `type`). */
function typeOnlyClause(clause) {
  if (/^(import|export)\s+type\s/.test(clause)) return true;
  const names = /\{([^}]*)\}/.exec(clause)?.[1];
  if (names === undefined || /^(import|export)\s+[\w$]+\s*,/.test(clause) || /\*/.test(clause)) return false;
  const list = names
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
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
  const files = [
    ...sourceFiles(root, "src"),
    ...(existsSync(join(root, "packages")) ? readdirSync(join(root, "packages")).flatMap((p) => sourceFiles(root, `packages/${p}/src`)) : []),
  ];
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
  const edges = (v) => (graph.get(v) ?? []).filter((d) => !d.dynamic && graph.has(d.target) && !(d.typeOnly && sameFolder(v, d.target))).map((d) => d.target);
  return cyclesOf(graph.keys(), edges).map((component) => component.sort());
}

/**
 * Folders of src/service that import each other although each is its own concern; each pair (sorted) with why it
 * is allowed. A pair listed here that no longer imports both ways fails the check too: the list only shrinks.
 */
export const FOLDER_PAIRS_ALLOWED = [
  {
    folders: ["engine", "webhooks"],
    why: "a job's record carries the webhook events it asked for (engine/types.ts names webhooks/events.ts's types) and the webhook routes read jobs through the engine; the event types belong below both",
  },
  {
    folders: ["http", "management"],
    why: "the management API's schemas (http/schema.ts) publish the volume types management's store defines, and management's routes are HTTP code",
  },
  {
    folders: ["http", "webhooks"],
    why: "http/'s body schemas and OpenAPI document include the webhooks' events and settings, and the webhook routes are HTTP code; those schemas belong with the webhooks",
  },
  {
    folders: ["jobs", "webhooks"],
    why: "the outbox that delivers webhooks (jobs/webhook-outbox.ts) uses webhooks/' schedule and signing, and webhooks/ starts it; the outbox belongs in webhooks/",
  },
  {
    folders: ["management", "volumes"],
    why: "the volumes' S3 API and access keys read management's volume records and route context, and management's rows include the volume key routes: one feature in two folders",
  },
];

/** The folder of src/service a module belongs to ("jobs" for src/service/jobs/routes.ts); undefined outside one. */
function serviceFolder(file) {
  if (!file.startsWith(SVC)) return undefined;
  const rest = file.slice(SVC.length);
  const slash = rest.indexOf("/");
  return slash < 0 ? undefined : rest.slice(0, slash);
}

/**
 * Pairs of folders of src/service that import each other (type imports and import() included, tests not): each
 * as { folders: [a, b] sorted, imports: one import each way as "file -> target" }. Pure.
 */
export function folderCycles(graph) {
  const between = new Map();
  for (const [file, deps] of graph) {
    const from = serviceFolder(file);
    if (from === undefined || /\.test\.tsx?$/.test(file)) continue;
    for (const { target } of deps) {
      const to = serviceFolder(target);
      if (to !== undefined && to !== from && !between.has(`${from} ${to}`)) between.set(`${from} ${to}`, `${file} -> ${target}`);
    }
  }
  const pairs = [];
  for (const [key, example] of between) {
    const [a, b] = key.split(" ");
    if (a < b && between.has(`${b} ${a}`)) pairs.push({ folders: [a, b], imports: [example, between.get(`${b} ${a}`)] });
  }
  return pairs.sort((x, y) => x.folders.join(" ").localeCompare(y.folders.join(" ")));
}

/** The service's tiers, bottom up: the floor (store/), the core, the rest. */
const tierOf = (file) => (file.startsWith(STORE) ? 0 : under(CORE)(file) ? 1 : 2);

/** Imports in src/service (tests not) from a module to one of a higher tier, as "file -> target". Pure. */
export function upwardImports(graph) {
  const out = new Set();
  for (const [file, deps] of graph) {
    if (!inService(file) || /\.test\.tsx?$/.test(file)) continue;
    for (const { target } of deps) if (inService(target) && tierOf(target) > tierOf(file)) out.add(`${file} -> ${target}`);
  }
  return [...out].sort();
}

/** The most lines a file under src/ may have: a file holds one concern (docs/architecture.md). */
export const MAX_FILE_LINES = 600;

/** Files of `graph` under src/ longer than MAX_FILE_LINES, as [path, lines]. */
export function oversizeFiles(root, graph) {
  const out = [];
  for (const file of graph.keys()) {
    if (!file.startsWith("src/")) continue;
    const lines = readFileSync(join(root, file), "utf8").split("\n").length - 1;
    if (lines > MAX_FILE_LINES) out.push([file, lines]);
  }
  return out.sort();
}

/** The report for `root`: lines to print and whether the layers hold. */
export function checkLayers(root, allowedPairs = FOLDER_PAIRS_ALLOWED) {
  const graph = importGraph(root);
  const violations = layerViolations(graph);
  const cycles = importCycles(graph);
  const folderPairs = folderCycles(graph);
  const allowed = new Map(allowedPairs.map((p) => [[...p.folders].sort().join(" "), p.why]));
  const found = new Set(folderPairs.map((p) => p.folders.join(" ")));
  const lines = [
    ...violations.map((v) => `${v.file} imports ${v.target}: breaks "${v.rule}" (${v.why})`),
    ...oversizeFiles(root, graph).map(([file, lines]) => `${file} has ${lines} lines, over ${MAX_FILE_LINES}: split it along its seams`),
    ...cycles.map((c) => `import cycle among ${c.length} modules (type imports included):\n${c.map((f) => `  ${f}`).join("\n")}`),
    ...folderPairs
      .filter((p) => !allowed.has(p.folders.join(" ")))
      .map((p) => `folders ${SVC}${p.folders[0]}/ and ${SVC}${p.folders[1]}/ import each other:\n${p.imports.map((i) => `  ${i}`).join("\n")}`),
    ...[...allowed.keys()]
      .filter((key) => !found.has(key))
      .map(
        (key) =>
          `folders ${key
            .split(" ")
            .map((f) => `${SVC}${f}/`)
            .join(" and ")} no longer import each other: take the pair off FOLDER_PAIRS_ALLOWED`,
      ),
  ];
  return {
    ok: lines.length === 0,
    lines,
    modules: graph.size,
    upward: upwardImports(graph).length,
    folderPairs: folderPairs.length,
    allowedPairs: allowed.size,
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? ".");
  const { ok, lines, modules, upward, folderPairs, allowedPairs } = checkLayers(root);
  const counts = `src/service: ${upward} upward imports, ${folderPairs} folder pairs importing each other (${allowedPairs} allowed)`;
  if (ok) {
    process.stdout.write(`check-layers: ${modules} modules, every layer rule holds, no import cycle; ${counts}\n`);
  } else {
    process.stderr.write(`${lines.join("\n")}\n${counts}\n`);
    process.exit(1);
  }
}
