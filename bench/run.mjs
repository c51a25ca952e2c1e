#!/usr/bin/env node
// `npm run bench`: runs every bench/*.bench.mjs and prints one table. Each figure stands beside a baseline
// measured in the same run on the same machine, with their ratio, so numbers compare across machines.
//
// A bench module exports `title` and `async run()` returning rows:
//   { name, value, unit, baselineName, baseline, ratio, target, met, spread?, note? }
// ratio is value / baseline; `target` is a short text like "<= 2x"; `met` says whether this run met it.
// `spread` ([lowest, highest]): the ratio's range over the rounds of a row measured in rounds; `note`: what a
// row's figures mean (the peer's settings, why a peer could not start), printed under the table, numbered.
import { readdirSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { join } from "node:path";

const dir = fileURLToPath(new URL(".", import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".bench.mjs"))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();

const fmt = (n) => (typeof n !== "number" ? String(n) : Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2));
const rows = [];
let failures = 0;
for (const file of files) {
  const mod = await import(pathToFileURL(join(dir, file)).href);
  process.stderr.write(`bench: ${mod.title ?? file}...\n`);
  try {
    for (const row of await mod.run()) rows.push({ bench: file.replace(".bench.mjs", ""), ...row });
  } catch (err) {
    failures++;
    process.stderr.write(`bench ${file} failed: ${err?.stack ?? err}\n`);
    rows.push({
      bench: file.replace(".bench.mjs", ""),
      name: "(failed)",
      value: "-",
      unit: "",
      baselineName: String(err?.message ?? err).slice(0, 60),
      baseline: "-",
      ratio: "-",
      target: "",
      met: false,
    });
  }
}

const header = ["bench", "measure", "value", "baseline", "baseline value", "ratio", "spread", "target", "met"];
const notes = [];
// Rows with the same note share its number.
const noteNumber = (note) => (notes.includes(note) ? notes.indexOf(note) : notes.push(note) - 1) + 1;
const table = rows.map((r) => [
  r.bench,
  r.note ? `${r.name} [${noteNumber(r.note)}]` : r.name,
  `${fmt(r.value)} ${r.unit}`.trim(),
  r.baselineName,
  `${fmt(r.baseline)} ${r.unit}`.trim(),
  typeof r.ratio === "number" ? `${r.ratio.toFixed(2)}x` : String(r.ratio),
  Array.isArray(r.spread) ? `${r.spread[0].toFixed(2)}-${r.spread[1].toFixed(2)}x` : "",
  r.target ?? "",
  r.met === undefined ? "" : r.met ? "yes" : "NO",
]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
console.log(line(header));
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
for (const row of table) console.log(line(row));
if (notes.length) console.log(`\n${notes.map((n, i) => `[${i + 1}] ${n}`).join("\n")}`);
console.log(`\nnode ${process.version}, ${(await import("node:os")).cpus().length} cores, ${new Date().toISOString()}`);
process.exitCode = failures ? 1 : 0;
