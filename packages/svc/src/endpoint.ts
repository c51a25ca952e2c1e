// `Endpoint(config)`: the one entry point of user code.
//
//   Endpoint(config)(fn)        -> a queue-based endpoint function (async generators stream)
//   @Endpoint(config) class X   -> a class endpoint: one instance per worker, each public method a function
//   Endpoint(config).post(...)  -> a load-balanced endpoint with HTTP routes
//   Endpoint({ name, image })   -> an image endpoint: a container image (a provider worker) runs its jobs; no handler
//
// The build finds these forms statically; at run time this module only marks what it wraps, and routes calls
// either in-process (inside the endpoint's own worker) or through the job API (anywhere else).

import { configProblems, HTTP_METHODS, type EndpointConfig, type HttpMethod, type ImageEndpointConfig } from "./config.js";
import { callRemote, submitRemote, streamRemote, type JobHandle, type RunOptions } from "./remote.js";
import { currentRuntime } from "./context.js";

export const ENDPOINT_META = Symbol.for("svc.endpoint");

export type AnyFunction = (input: any, ...rest: any[]) => any;
export type AnyClass = abstract new (...args: any[]) => any;

export interface FunctionMeta {
  kind: "function" | "generator";
  config: EndpointConfig;
  fn: AnyFunction;
}
export interface ClassMeta {
  kind: "class";
  config: EndpointConfig;
}
export interface LoadBalancedMeta {
  kind: "lb";
  config: EndpointConfig;
  routes: RouteDefinition[];
}
export interface ImageMeta {
  kind: "image";
  config: ImageEndpointConfig;
}
export type EndpointMeta = FunctionMeta | ClassMeta | LoadBalancedMeta | ImageMeta;

/** What a route handler receives besides the parsed body. */
export interface RouteContext {
  /** Path parameters, e.g. { id: "42" } for "/items/:id". */
  params: Record<string, string>;
  query: URLSearchParams;
  headers: Record<string, string | string[] | undefined>;
  method: HttpMethod;
  path: string;
}
/** A route handler: return a JSON-able value, a Uint8Array, a string, or a web `Response` for full control. */
export type RouteHandler = (body: any, ctx: RouteContext) => unknown;

export interface RouteDefinition {
  method: HttpMethod;
  path: string;
  handler: RouteHandler;
}

type InputOf<F> = F extends (...args: infer A) => any ? (A extends [] ? void : A[0]) : never;
type YieldOf<R> = R extends AsyncGenerator<infer Y, any, any> ? Y : R extends Generator<infer Y, any, any> ? Y : never;

/** A queue-based endpoint function: call it for its result, or `.run()` it for a job handle. */
export interface QueueFunction<I, O> {
  (input: I): Promise<O>;
  run(input: I, options?: RunOptions): Promise<JobHandle<O, never>>;
  readonly endpointName: string;
}
/** A streaming endpoint function: call it to iterate its chunks as they arrive. */
export interface StreamingFunction<I, C> {
  (input: I): AsyncIterable<C>;
  run(input: I, options?: RunOptions): Promise<JobHandle<C[], C>>;
  readonly endpointName: string;
}

export type EndpointFunction<F extends AnyFunction> = [YieldOf<ReturnType<F>>] extends [never]
  ? QueueFunction<InputOf<F>, Awaited<ReturnType<F>>>
  : StreamingFunction<InputOf<F>, YieldOf<ReturnType<F>>>;

/** What `Endpoint(config)` returns: a decorator for functions and classes, and a load-balanced route table. */
export interface EndpointDefinition {
  <C extends AnyClass>(target: C, context?: ClassDecoratorContext<C>): C;
  <F extends AnyFunction>(fn: F): EndpointFunction<F>;
  get(path: string, handler: RouteHandler): EndpointDefinition;
  post(path: string, handler: RouteHandler): EndpointDefinition;
  put(path: string, handler: RouteHandler): EndpointDefinition;
  patch(path: string, handler: RouteHandler): EndpointDefinition;
  delete(path: string, handler: RouteHandler): EndpointDefinition;
  readonly config: EndpointConfig;
  readonly routes: readonly RouteDefinition[];
}

/**
 * What `Endpoint({ name, image })` returns: the endpoint, whose jobs a container image runs. It takes no handler
 * (it is not a decorator); call it from code as any endpoint, through the job API.
 */
export interface ImageEndpoint<I = unknown, O = unknown> {
  /** Run a job and wait for its output. */
  call(input: I): Promise<O>;
  /** Submit a job; its handle waits for the result. */
  run(input: I, options?: RunOptions): Promise<JobHandle<O, never>>;
  readonly endpointName: string;
  readonly image: string;
  readonly config: ImageEndpointConfig;
}

function isClass(value: unknown): value is AnyClass {
  return typeof value === "function" && /^class[\s{]/.test(Function.prototype.toString.call(value));
}

function isGeneratorFunction(fn: AnyFunction): boolean {
  const tag = Object.getPrototypeOf(fn)?.constructor?.name;
  return tag === "AsyncGeneratorFunction" || tag === "GeneratorFunction";
}

export function getMeta(value: unknown): EndpointMeta | undefined {
  if ((typeof value === "function" || typeof value === "object") && value !== null) {
    return (value as { [ENDPOINT_META]?: EndpointMeta })[ENDPOINT_META];
  }
  return undefined;
}

export function Endpoint<I = unknown, O = unknown>(config: ImageEndpointConfig): ImageEndpoint<I, O>;
export function Endpoint(config: EndpointConfig): EndpointDefinition;
export function Endpoint(config: EndpointConfig): EndpointDefinition | ImageEndpoint {
  const problems = configProblems(config);
  if (problems.length > 0) {
    throw new TypeError(`Invalid endpoint configuration: ${problems.join("; ")}`);
  }
  if (config.image !== undefined) return imageEndpoint(config as ImageEndpointConfig);
  const routes: RouteDefinition[] = [];

  const decorate = (target: unknown): unknown => {
    if (isClass(target)) {
      Object.defineProperty(target, ENDPOINT_META, { value: { kind: "class", config } satisfies ClassMeta });
      return target;
    }
    if (typeof target === "function") return wrapFunction(target as AnyFunction, config);
    throw new TypeError(`Endpoint(${JSON.stringify(config.name)}) decorates a function or a class`);
  };

  const definition = decorate as unknown as EndpointDefinition & Record<string, unknown>;
  Object.defineProperty(definition, ENDPOINT_META, { value: { kind: "lb", config, routes } satisfies LoadBalancedMeta });
  Object.defineProperty(definition, "config", { value: config, enumerable: true });
  Object.defineProperty(definition, "routes", { value: routes, enumerable: true });
  for (const method of HTTP_METHODS) {
    definition[method.toLowerCase()] = (path: string, handler: RouteHandler) => {
      if (typeof path !== "string" || !path.startsWith("/")) throw new TypeError(`route path must start with "/": ${path}`);
      if (typeof handler !== "function") throw new TypeError(`${method} ${path} needs a handler function`);
      routes.push({ method, path, handler });
      return definition;
    };
  }
  return definition;
}

function imageEndpoint(config: ImageEndpointConfig): ImageEndpoint {
  const endpoint: ImageEndpoint = {
    call: (input) => callRemote(config.name, undefined, input),
    run: (input, options) => submitRemote(config.name, undefined, input, options) as Promise<JobHandle<unknown, never>>,
    endpointName: config.name,
    image: config.image,
    config,
  };
  Object.defineProperty(endpoint, ENDPOINT_META, { value: { kind: "image", config } satisfies ImageMeta });
  return endpoint;
}

function wrapFunction(fn: AnyFunction, config: EndpointConfig): unknown {
  const streaming = isGeneratorFunction(fn);
  const functionName = fn.name || undefined;
  const inProcess = () => currentRuntime()?.endpointName === config.name;

  const call = streaming
    ? (input: unknown) => (inProcess() ? fn(input) : streamRemote(config.name, functionName, input))
    : (input: unknown) => (inProcess() ? Promise.resolve().then(() => fn(input)) : callRemote(config.name, functionName, input));

  const wrapper = function (this: unknown, input: unknown) {
    return call(input);
  };
  Object.defineProperty(wrapper, "name", { value: fn.name });
  Object.defineProperty(wrapper, "endpointName", { value: config.name, enumerable: true });
  Object.defineProperty(wrapper, "run", {
    value: (input: unknown, options?: RunOptions) => submitRemote(config.name, functionName, input, options),
  });
  Object.defineProperty(wrapper, ENDPOINT_META, {
    value: { kind: streaming ? "generator" : "function", config, fn } satisfies FunctionMeta,
  });
  return wrapper;
}

/** Public, callable methods of a class endpoint (what the build lists as its functions). */
export function publicMethodNames(cls: AnyClass): string[] {
  const names: string[] = [];
  for (const name of Object.getOwnPropertyNames(cls.prototype)) {
    if (name === "constructor" || name.startsWith("_")) continue;
    const desc = Object.getOwnPropertyDescriptor(cls.prototype, name);
    if (desc && typeof desc.value === "function") names.push(name);
  }
  return names;
}

type MethodClient<T> = {
  [K in keyof T as T[K] extends AnyFunction ? K : never]: T[K] extends AnyFunction ? EndpointFunction<T[K]> : never;
};

/**
 * A typed client for a class endpoint: `connect(Embedder).embed({ text })` runs `embed` on the endpoint's
 * workers (or in-process inside them).
 */
export function connect<C extends AnyClass>(cls: C): MethodClient<InstanceType<C>> {
  const meta = getMeta(cls);
  if (!meta || meta.kind !== "class") {
    throw new TypeError(`connect() takes a class decorated with @Endpoint(...); ${String((cls as { name?: string }).name)} is not one`);
  }
  const client: Record<string, unknown> = {};
  for (const method of publicMethodNames(cls)) {
    const proto = (cls as unknown as { prototype: Record<string, AnyFunction> }).prototype;
    const fn = proto[method]!;
    const streaming = isGeneratorFunction(fn);
    const viaRuntime = (input: unknown) => currentRuntime()?.invokeLocal?.(meta.config.name, method, input);
    const inProcess = () => currentRuntime()?.endpointName === meta.config.name;
    const call = streaming
      ? (input: unknown) => (inProcess() ? viaRuntime(input) : streamRemote(meta.config.name, method, input))
      : (input: unknown) => (inProcess() ? Promise.resolve(viaRuntime(input)) : callRemote(meta.config.name, method, input));
    const wrapper = (input: unknown) => call(input);
    Object.defineProperty(wrapper, "name", { value: method });
    Object.defineProperty(wrapper, "endpointName", { value: meta.config.name, enumerable: true });
    Object.defineProperty(wrapper, "run", {
      value: (input: unknown, options?: RunOptions) => submitRemote(meta.config.name, method, input, options),
    });
    client[method] = wrapper;
  }
  return client as MethodClient<InstanceType<C>>;
}
