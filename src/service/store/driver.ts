// Which better-sqlite3 the service opens its SQLite file with. Node >= 22: the current major (13, Node-API,
// prebuilt in the package). Node 20: the previous major (12), because 13 does not load there. 12 is not used
// where 13 runs: 12 compiled against Node 24.19+ headers aborts the process when a statement is garbage
// collected ("Assertion failed: (env) != nullptr" in RemoveEnvironmentCleanupHook, nodejs/node#65446).
// 13 is an optional dependency (an npm alias) that npm skips on Node 20; when it is missing or cannot load,
// 12 serves. Both have the same API; the types are @types/better-sqlite3's.

import type BetterSqlite3 from "better-sqlite3";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

function chooseDriver(): { path: string; module: typeof BetterSqlite3 } {
  if (Number(process.versions.node.split(".")[0]) >= 22) {
    try {
      const path = require.resolve("better-sqlite3-13");
      return { path, module: require(path) as typeof BetterSqlite3 };
    } catch {
      // not installed (or no prebuilt binary for this platform): the previous major below
    }
  }
  const path = require.resolve("better-sqlite3");
  return { path, module: require(path) as typeof BetterSqlite3 };
}

// Chosen (and its native module loaded) when first asked: the CLI's commands import stores' modules without
// opening any (docs/design/0019-cli-loads-on-use.md).
let chosen: ReturnType<typeof chooseDriver> | undefined;
const driver = () => (chosen ??= chooseDriver());

/** The driver's module path, for a worker thread that opens its own connection with the same driver. */
export function sqliteDriverPath(): string {
  return driver().path;
}

/** A connection to the SQLite file `file` (created if missing), through the chosen driver. */
export function openDatabase(file: string, options?: BetterSqlite3.Options): BetterSqlite3.Database {
  return new (driver().module)(file, options);
}
