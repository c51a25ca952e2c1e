// Which files static discovery scans: source files under the project root, minus built-in ignores,
// the project's .gitignore files (root and nested) and the caller's extra ignore patterns.

import { readFile } from "node:fs/promises";
import path from "node:path";
import ignore, { type Ignore } from "ignore";

export const SOURCE_EXTENSIONS = [".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".jsx"] as const;
export const SOURCE_PATTERN = "**/*.{ts,tsx,mts,cts,js,mjs,cjs,jsx}";

/** Always skipped: dependencies, svc/build outputs, VCS data, tests and type declarations. */
export const BUILTIN_IGNORES = [
  "node_modules/",
  ".svc/",
  "dist/",
  "build/",
  "coverage/",
  ".git/",
  "test/",
  "tests/",
  "__tests__/",
  "*.test.*",
  "*.spec.*",
  "*.d.ts",
  "*.d.mts",
  "*.d.cts",
] as const;

// The same rules as globs, so fast-glob never descends into these directories (node_modules can be huge).
const BUILTIN_GLOB_IGNORES = BUILTIN_IGNORES.map((p) => (p.endsWith("/") ? `**/${p}**` : `**/${p}`));

interface ScopedIgnore {
  /** Directory of the .gitignore relative to the root ("" for the root), forward slashes. */
  dir: string;
  rules: Ignore;
}

export function isIgnoredBy(scoped: readonly ScopedIgnore[], file: string): boolean {
  for (const { dir, rules } of scoped) {
    if (dir === "") {
      if (rules.ignores(file)) return true;
    } else if (file.startsWith(`${dir}/`) && rules.ignores(file.slice(dir.length + 1))) {
      return true;
    }
  }
  return false;
}

/** Source files under `root` (relative, forward slashes, sorted) that discovery scans. */
export async function findSourceFiles(root: string, extraIgnores: readonly string[] = []): Promise<string[]> {
  const globIgnores = [...BUILTIN_GLOB_IGNORES];
  // Loaded here: every `svc` command builds the command tree that imports this module (docs/design/0019).
  const { default: fg } = await import("fast-glob");
  const [candidates, gitignores] = await Promise.all([
    fg(SOURCE_PATTERN, { cwd: root, ignore: globIgnores, onlyFiles: true, dot: false }),
    fg("**/.gitignore", { cwd: root, ignore: globIgnores, onlyFiles: true, dot: true }),
  ]);
  const scoped: ScopedIgnore[] = [];
  for (const file of gitignores.sort()) {
    const dir = path.posix.dirname(file);
    scoped.push({ dir: dir === "." ? "" : dir, rules: ignore().add(await readFile(path.join(root, file), "utf8")) });
  }
  if (extraIgnores.length > 0) scoped.push({ dir: "", rules: ignore().add([...extraIgnores]) });
  return candidates.filter((file) => !isIgnoredBy(scoped, file)).sort();
}
