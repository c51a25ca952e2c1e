#!/usr/bin/env node
// Fails when the compiled modules import each other in a cycle (type-only imports are gone from dist/, so
// only imports that run count). A cycle makes load order matter and hides which module is the composition
// root; `src/service/index.ts` must be imported by nothing inside the service.
// Usage: node scripts/check-cycles.mjs [dist]   (after `npm run build`)

import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { cyclesOf } from "./strongly-connected.mjs";

const root = resolve(process.argv[2] ?? "dist");

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "console" ? [] : files(path);
    return name.endsWith(".js") ? [path] : [];
  });
}

// Static imports and re-exports with a relative specifier; dynamic import() is lazy and may not form a cycle.
const IMPORT = /^\s*(?:import|export)\s[^;]*?from\s*["'](\.{1,2}\/[^"']+)["']|^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm;

const graph = new Map();
for (const file of files(root)) {
  const text = readFileSync(file, "utf8");
  const deps = new Set();
  for (const m of text.matchAll(IMPORT)) deps.add(resolve(dirname(file), m[1] ?? m[2]));
  graph.set(
    file,
    [...deps].filter((d) => d !== file),
  );
}

const cycles = cyclesOf(graph.keys(), (v) => (graph.get(v) ?? []).filter((w) => graph.has(w)));

const rel = (p) => relative(root, p);
const serviceRoot = join(root, "service", "index.js");
const importers = [...graph].filter(([file, deps]) => file.startsWith(join(root, "service")) && deps.includes(serviceRoot)).map(([file]) => rel(file));

if (cycles.length === 0 && importers.length === 0) {
  process.stdout.write(`check-cycles: ${graph.size} modules, no import cycle\n`);
  process.exit(0);
}
for (const c of cycles)
  process.stderr.write(
    `import cycle among ${c.length} modules:\n${c
      .map((f) => `  ${rel(f)}`)
      .sort()
      .join("\n")}\n`,
  );
if (importers.length > 0)
  process.stderr.write(`service/index.js is the composition root; these service modules import it:\n${importers.map((f) => `  ${f}`).join("\n")}\n`);
process.exit(1);
