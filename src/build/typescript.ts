// The TypeScript compiler for discovery, loaded through `require` on first use. Imported as an ES module, Node
// lexes its 9 MB of CommonJS for named exports before anything runs: about a second on every `svc` command, most
// of which never discover anything. `TS` is its types; `ts` the compiler itself.

import { createRequire } from "node:module";
import type * as TS from "typescript";

export type { TS };

let loaded: typeof TS | undefined;

export const ts: typeof TS = new Proxy({} as typeof TS, {
  get: (_target, key) => Reflect.get((loaded ??= createRequire(import.meta.url)("typescript") as typeof TS), key),
});
