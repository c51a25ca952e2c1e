// Where a stack trace of a deployed endpoint points. esbuild writes a source map's `sources` relative to where
// the map was written at build time; inside an unpacked artifact those paths lead nowhere (`/src/boom.ts`). The
// build rewrites them: the project's own files become `svc-project:///<path in the project>` (Node keeps such a
// URL as it is in stack traces), everything else (svc itself when linked or run from a checkout, packages outside
// the project) the absolute file URL it had. The worker turns `svc-project:///src/boom.ts` into `src/boom.ts`: a
// path relative to the project, true on any machine, that an editor opens from the project's root.

import { isAbsolute, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";

export const PROJECT_SOURCE_SCHEME = "svc-project:///";

/** A source map's text with its `sources` rewritten as above. `mapDir`: where the map was written. Pure. */
export function projectSourceMap(mapText: string, mapDir: string, root: string): string {
  const map = JSON.parse(mapText) as { sources?: string[]; sourceRoot?: string };
  if (!Array.isArray(map.sources)) return mapText;
  const base = resolve(mapDir, map.sourceRoot ?? "");
  map.sources = map.sources.map((source) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(source)) return source;
    const abs = resolve(base, source);
    const rel = relative(root, abs);
    const inside = rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
    return inside ? `${PROJECT_SOURCE_SCHEME}${rel.split(sep).join("/")}` : pathToFileURL(abs).href;
  });
  delete map.sourceRoot;
  return JSON.stringify(map);
}

/** A stack trace with project sources as project-relative paths (`src/boom.ts:4:20`). Pure. */
export function projectRelativeStack(stack: string): string {
  return stack.split(PROJECT_SOURCE_SCHEME).join("");
}

/** Where a stack frame points: its file (a path, a file URL or node:...), without line and column. Pure. */
function frameFile(line: string): string | undefined {
  const m = /^\s+at (?:.*\()?(.+?)(?::\d+){0,2}\)?$/.exec(line);
  if (!m) return undefined;
  return m[1]!.startsWith("file://") ? decodeURIComponent(m[1]!.slice("file://".length)) : m[1]!;
}

/**
 * A job's stack with only the user's frames: svc's own (the worker runtime's and the SDK's files: under one of
 * `svcRoots`, or a `node_modules/svc` or `node_modules/svc-cli` package) and Node's (`node:...`) left out, the
 * message lines kept. The user's packages stay. A stack with no frame of the user's (the error came from svc
 * itself) stays whole: trimming it would leave nothing to go on. Pure.
 */
export function userStack(stack: string, svcRoots: readonly string[]): string {
  const roots = svcRoots.map((r) => (r.endsWith("/") ? r : `${r}/`));
  const ours = (file: string) => file.startsWith("node:") || roots.some((r) => file.startsWith(r)) || /(^|\/)node_modules\/svc(-cli)?\//.test(file);
  const lines = stack.split("\n");
  const kept = lines.filter((line) => {
    const file = frameFile(line);
    return file === undefined || !ours(file);
  });
  const framesLeft = kept.some((line) => frameFile(line) !== undefined);
  return framesLeft ? kept.join("\n") : stack;
}
