// The source fingerprint: changes exactly when the sources that make up the app change. `svc deploy` compares
// it to decide on a rolling release. Build outputs, timestamps and file order never enter it.

import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

/** Project files that decide what gets installed, hashed with the sources when present. */
export const FINGERPRINT_EXTRA_FILES = ["package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml"];

/** Hash of (path, contents) pairs, independent of their order. Paths are relative, forward slashes. */
export function fingerprintOf(files: ReadonlyArray<{ path: string; contents: Buffer | string }>): string {
  const hash = createHash("sha256");
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const file of sorted) {
    const contents = typeof file.contents === "string" ? Buffer.from(file.contents) : file.contents;
    // Length-prefixed so that no two different file sets can produce the same byte stream.
    hash.update(`${file.path}\0${contents.length}\0`);
    hash.update(contents);
  }
  return `sha256:${hash.digest("hex")}`;
}

/** Fingerprint the discovered source files plus package.json and any lock file of the project. */
export async function fingerprintProject(root: string, sourceFiles: readonly string[]): Promise<string> {
  const paths = new Set(sourceFiles);
  for (const extra of FINGERPRINT_EXTRA_FILES) if (existsSync(join(root, extra))) paths.add(extra);
  const files = await Promise.all([...paths].map(async (path) => ({ path, contents: await readFile(join(root, path)) })));
  return fingerprintOf(files);
}
