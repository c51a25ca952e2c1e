// The contract between a generated handler (written by `svc build`, bundled into the artifact) and the worker
// runtime. A generated entry looks like:
//
//   import * as m0 from "../../src/gpu.ts";
//   import { __defineHandler } from "svc";
//   export default __defineHandler({
//     endpoint: "gpu-worker", kind: "queue",
//     functions: [{ name: "upscale", kind: "function", ref: m0.upscale },
//                 { name: "embed", kind: "method", classRef: m0.Embedder, method: "embed" }],
//   });
//
// and for a load-balanced endpoint `{ endpoint: "api", kind: "lb", lb: m0.api }`.
// The runtime imports the bundle, awaits `init()`, then calls `invoke()` per job (or serves `routes`).

import { getMeta, type AnyClass, type AnyFunction, type RouteDefinition } from "./endpoint.js";
import type { FunctionKind } from "./manifest.js";
import type { JobContext } from "./job-context.js";

export interface HandlerFunctionSpec {
  name: string;
  kind: FunctionKind;
  /** The wrapped endpoint function (kinds "function" and "generator"). */
  ref?: unknown;
  /** The decorated class (kinds "method" and "generator-method"). */
  classRef?: unknown;
  method?: string;
}

export interface HandlerSpec {
  endpoint: string;
  kind: "queue" | "lb";
  functions?: HandlerFunctionSpec[];
  /** The load-balanced endpoint definition (kind "lb"). */
  lb?: unknown;
}

/** What the runtime hands a job's function: its JobContext (job-context.ts). */
export type InvokeContext = JobContext;

export type InvokeResult = { kind: "value"; value: Promise<unknown> } | { kind: "stream"; stream: AsyncIterable<unknown> };

export interface LoadedHandler {
  readonly endpoint: string;
  readonly kind: "queue" | "lb";
  readonly functionNames: string[];
  readonly routes: readonly RouteDefinition[];
  /** Instantiate class endpoints (one instance per worker). Idempotent. */
  init(): Promise<void>;
  /** Start one job. `name` may be omitted when the endpoint serves exactly one function. */
  invoke(name: string | undefined, input: unknown, ctx: InvokeContext): InvokeResult;
}

/** Raised for a job that names no function, or one the endpoint does not serve: the job fails with this message. */
export class UnknownFunctionError extends Error {
  constructor(endpoint: string, name: string | undefined, known: string[]) {
    super(
      name === undefined
        ? `Endpoint "${endpoint}" serves several functions (${known.join(", ")}); name one with the job's "function" field`
        : `Endpoint "${endpoint}" has no function "${name}"; it serves: ${known.join(", ")}`,
    );
    this.name = "UnknownFunctionError";
  }
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
function isSyncIterator(value: unknown): value is Generator<unknown> {
  return typeof value === "object" && value !== null && typeof (value as Generator).next === "function" && Symbol.iterator in value;
}

export function __defineHandler(spec: HandlerSpec): LoadedHandler {
  const specs = spec.functions ?? [];
  const byName = new Map(specs.map((f) => [f.name, f]));
  const instances = new Map<unknown, Record<string, AnyFunction>>();
  let routes: RouteDefinition[] = [];
  if (spec.kind === "lb") {
    const meta = getMeta(spec.lb);
    if (!meta || meta.kind !== "lb") throw new Error(`Endpoint "${spec.endpoint}": its load-balanced definition was not found in the bundle`);
    routes = meta.routes;
  }

  let initialized: Promise<void> | undefined;
  const init = () =>
    (initialized ??= (async () => {
      for (const f of specs) {
        if (f.classRef && !instances.has(f.classRef)) {
          instances.set(f.classRef, new (f.classRef as AnyClass & (new () => Record<string, AnyFunction>))());
        }
      }
    })());

  const target = (f: HandlerFunctionSpec): AnyFunction => {
    if (f.classRef) {
      const instance = instances.get(f.classRef);
      if (!instance) throw new Error(`Endpoint "${spec.endpoint}": call init() before invoke()`);
      const method = instance[f.method ?? f.name];
      if (typeof method !== "function") throw new Error(`Endpoint "${spec.endpoint}": ${f.method} is not a method`);
      return method.bind(instance);
    }
    const meta = getMeta(f.ref);
    if (!meta || (meta.kind !== "function" && meta.kind !== "generator")) {
      throw new Error(`Endpoint "${spec.endpoint}": function ${f.name} was not found in the bundle`);
    }
    return meta.fn;
  };

  return {
    endpoint: spec.endpoint,
    kind: spec.kind,
    functionNames: specs.map((f) => f.name),
    routes,
    init,
    invoke(name, input, ctx) {
      const f = name === undefined ? (specs.length === 1 ? specs[0] : undefined) : byName.get(name);
      if (!f)
        throw new UnknownFunctionError(
          spec.endpoint,
          name,
          specs.map((s) => s.name),
        );
      const result = target(f)(input, ctx);
      if (isAsyncIterable(result)) return { kind: "stream", stream: result };
      if (isSyncIterator(result)) {
        const iterator = result;
        return {
          kind: "stream",
          stream: (async function* () {
            yield* iterator;
          })(),
        };
      }
      return { kind: "value", value: Promise.resolve(result) };
    },
  };
}
