// Lets scripts run under Node import src/textgen.ts as the build bundles it: a `*.txt` import is the file's text
// (esbuild's text loader). `npm run chat` loads it with `--import`.
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
import { readFile } from "node:fs/promises";
export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !new URL(url).pathname.endsWith(".txt")) return nextLoad(url, context);
  const text = await readFile(new URL(url), "utf8");
  return { format: "module", source: "export default " + JSON.stringify(text) + ";", shortCircuit: true };
}`),
);
