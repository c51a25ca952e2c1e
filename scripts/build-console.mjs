// Bundles the web console (console/) with esbuild into dist/console/: index.html plus a content-hashed
// script and stylesheet. Run by `npm run build` / `prepare` after tsc; the service serves the result under
// /console/ (src/service/http/console.ts). Everything is local: no CDN, fonts or remote scripts.

import { build } from "esbuild";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const target = join(root, "dist", "console");
// Built beside the target and swapped in at the end: a running service (or a parallel build) never sees a
// half-written folder.
const outdir = `${target}.building-${process.pid}`;

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

const result = await build({
  entryPoints: [join(root, "console", "main.tsx")],
  bundle: true,
  outdir,
  entryNames: "[name]-[hash]",
  format: "esm",
  target: ["chrome109", "firefox115", "safari16"],
  jsx: "automatic",
  jsxImportSource: "preact",
  minify: true,
  sourcemap: "linked",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const script = outputs.find((f) => f.endsWith(".js"));
const style = outputs.find((f) => f.endsWith(".css"));
if (!script || !style) throw new Error(`build-console: expected a .js and a .css output, got ${outputs.join(", ")}`);

const html = readFileSync(join(root, "console", "index.html"), "utf8")
  .replace("%SCRIPT%", `./${script}`)
  .replace("%STYLE%", `./${style}`);
writeFileSync(join(outdir, "index.html"), html);
const old = `${target}.old-${process.pid}`;
try {
  renameSync(target, old);
} catch (err) {
  if (err.code !== "ENOENT") throw err;
}
renameSync(outdir, target);
rmSync(old, { recursive: true, force: true });
process.stderr.write(`build-console: dist/console/ (${outputs.filter((f) => !f.endsWith(".map")).join(", ")})\n`);
