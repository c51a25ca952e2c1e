// Load-balanced endpoints: the worker serves the endpoint's HTTP routes itself (no job protocol), plus
// `GET /ping` for health checks. Route matching and response conversion are pure; `serveRoutes` does the I/O.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from "node:net";
import { rmSync } from "node:fs";
import { type HttpMethod, type Manifest, MANIFEST_FILE, type RouteContext, type RouteDefinition } from "svc/internal";
import { errorMessage } from "../errors.js";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { credentialMatches, LB_CREDENTIAL_HEADER } from "../lb-credential.js";

export const LB_BODY_LIMIT = 20 * 1024 * 1024;

export type RouteMatch =
  | { kind: "route"; route: RouteDefinition; params: Record<string, string> }
  | { kind: "method-not-allowed"; allow: HttpMethod[] }
  | { kind: "not-found" };

function segments(path: string): string[] {
  return path.split("/").filter((s) => s !== "");
}

/** Which route serves `method path`. ":name" segments capture path parameters. Pure. */
export function matchRoute(routes: readonly RouteDefinition[], method: string, path: string): RouteMatch {
  const parts = segments(path);
  const allow: HttpMethod[] = [];
  for (const route of routes) {
    const pattern = segments(route.path);
    if (pattern.length !== parts.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < pattern.length && ok; i++) {
      const p = pattern[i]!;
      if (p.startsWith(":")) {
        try {
          params[p.slice(1)] = decodeURIComponent(parts[i]!);
        } catch {
          ok = false;
        }
      } else ok = p === parts[i];
    }
    if (!ok) continue;
    if (route.method === method || (method === "HEAD" && route.method === "GET")) return { kind: "route", route, params };
    allow.push(route.method);
  }
  return allow.length > 0 ? { kind: "method-not-allowed", allow } : { kind: "not-found" };
}

export interface LbResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** A web Response's body, written chunk by chunk as the handler produces it (chunked, SSE). */
  stream?: AsyncIterable<Uint8Array>;
}

function problem(status: number, title: string, detail: string): LbResponse {
  return {
    status,
    headers: { "content-type": "application/problem+json" },
    body: Buffer.from(JSON.stringify({ title, status, detail })),
  };
}

/** Turn what a route handler returned into an HTTP response. */
export async function toResponse(value: unknown): Promise<LbResponse> {
  if (typeof Response !== "undefined" && value instanceof Response) {
    const headers: Record<string, string> = {};
    value.headers.forEach((v, k) => (headers[k] = v));
    // A body without a declared length may be produced over time (SSE, chunked): pass it on as it comes.
    if (value.body && headers["content-length"] === undefined) {
      return { status: value.status, headers, body: Buffer.alloc(0), stream: value.body as unknown as AsyncIterable<Uint8Array> };
    }
    return { status: value.status, headers, body: Buffer.from(await value.arrayBuffer()) };
  }
  if (value === undefined) return { status: 204, headers: {}, body: Buffer.alloc(0) };
  if (value instanceof Uint8Array) return { status: 200, headers: { "content-type": "application/octet-stream" }, body: Buffer.from(value) };
  if (typeof value === "string") return { status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: Buffer.from(value) };
  return { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from(JSON.stringify(value)) };
}

/** The request body as the handler sees it: parsed JSON, text, raw bytes, or undefined when empty. */
export function parseBody(raw: Buffer, contentType: string | undefined): { value: unknown } | { error: string } {
  if (raw.length === 0) return { value: undefined };
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "application/json" || type.endsWith("+json") || type === "") {
    try {
      return { value: JSON.parse(raw.toString("utf8")) };
    } catch (err) {
      if (type === "") return { value: raw.toString("utf8") };
      return { error: `The body is not valid JSON: ${errorMessage(err)}` };
    }
  }
  if (type.startsWith("text/") || type === "application/x-www-form-urlencoded") return { value: raw.toString("utf8") };
  return { value: raw };
}

async function readRequest(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > LB_BODY_LIMIT) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Handle one request against `routes`; `null` routes: the handler is still loading (/ping answers 204, routes
 * 503). Exposed for tests; `serveRoutes` wires it to a server.
 */
export async function handleLbRequest(routes: readonly RouteDefinition[] | null, req: IncomingMessage): Promise<LbResponse> {
  const url = new URL(req.url ?? "/", "http://worker");
  const method = (req.method ?? "GET").toUpperCase();
  if (routes === null) {
    req.resume();
    if (url.pathname === "/ping") return { status: 204, headers: {}, body: Buffer.alloc(0) };
    const response = problem(503, "Service Unavailable", "The worker is still initializing");
    response.headers["retry-after"] = "1";
    return response;
  }
  const match = matchRoute(routes, method, url.pathname);
  if (match.kind !== "route") {
    req.resume();
    if (url.pathname === "/ping" && (method === "GET" || method === "HEAD")) return toResponse({ status: "healthy" });
    if (match.kind === "method-not-allowed") {
      const response = problem(405, "Method Not Allowed", `${method} is not served on ${url.pathname}; allowed: ${match.allow.join(", ")}`);
      response.headers.allow = match.allow.join(", ");
      return response;
    }
    return problem(404, "Not Found", `No route ${method} ${url.pathname}`);
  }
  const raw = await readRequest(req);
  if (!raw) return problem(413, "Payload Too Large", `The body exceeds ${LB_BODY_LIMIT} bytes`);
  const body = parseBody(raw, req.headers["content-type"]);
  if ("error" in body) return problem(400, "Bad Request", body.error);
  const ctx: RouteContext = {
    params: match.params,
    query: url.searchParams,
    headers: req.headers,
    method: match.route.method,
    path: url.pathname,
  };
  try {
    return await toResponse(await match.route.handler(body.value, ctx));
  } catch (err) {
    return problem(500, "Internal Server Error", errorMessage(err));
  }
}

/**
 * The refusal of a request without this worker's credential (`expected`, undefined: none is asked), or undefined
 * when it carries it; the header is then removed, so the user's routes never see it. Runs before anything else
 * answers, /ping included: only the service's proxy, which derives the credential too, reaches the routes.
 */
export function refuseWithoutCredential(req: IncomingMessage, expected: Buffer | undefined): LbResponse | undefined {
  if (expected === undefined) return undefined;
  const presented = req.headers[LB_CREDENTIAL_HEADER];
  if (credentialMatches(presented, expected)) {
    delete req.headers[LB_CREDENTIAL_HEADER];
    return undefined;
  }
  return presented === undefined
    ? problem(
        401,
        "Unauthorized",
        `This worker answers only the svc service's proxy: the request has no ${LB_CREDENTIAL_HEADER} header. Call the endpoint through the service ({service}/lb/{endpoint_id}/...).`,
      )
    : problem(403, "Forbidden", `The ${LB_CREDENTIAL_HEADER} header is not this worker's credential`);
}

export interface RouteServer {
  /** `http://host:port` as the service should reach it. */
  address: string;
  port: number;
  /** The Unix socket path it also serves on (`socketPath` given and listening there worked). */
  socket?: string;
  /** The handler is loaded: serve these routes, and /ping answers 200. */
  ready(routes: readonly RouteDefinition[]): void;
  /** Stop accepting connections and wait for requests under way. */
  close(): Promise<void>;
}

/** Write a streamed body as it is produced; stop reading it when the client goes away. */
async function writeStream(res: ServerResponse, stream: AsyncIterable<Uint8Array>): Promise<void> {
  try {
    for await (const chunk of stream) {
      if (res.destroyed) break;
      if (!res.write(chunk))
        await new Promise<void>((resolve) => {
          res.once("drain", resolve);
          res.once("close", resolve);
        });
    }
    res.end();
  } catch {
    // the handler's stream failed midway: the status is gone already, so cut the response short
    res.destroy();
  }
}

/**
 * Serve `routes` (and /ping) on host:port (port 0: any free port). `null` routes: the server starts before the
 * handler is loaded (/ping 204) and `ready(routes)` switches it on. `wrap` runs each request (log scoping).
 */
export async function serveRoutes(
  initialRoutes: readonly RouteDefinition[] | null,
  options: {
    host?: string;
    port?: number;
    /** Also serve on this Unix socket path (SVC_LB_SOCKET): the service's proxy on the same machine uses it. */
    socketPath?: string;
    /**
     * The credential every request must carry (`lbCredentialOfToken` of the worker's token); requests without it
     * are refused before any route or /ping answers. Undefined: none is asked (tests of the routes alone).
     */
    credential?: string;
    wrap?: <T>(requestId: string, fn: () => Promise<T>) => Promise<T>;
  } = {},
): Promise<RouteServer> {
  let counter = 0;
  let routes = initialRoutes;
  const wrap = options.wrap ?? (<T>(_id: string, fn: () => Promise<T>) => fn());
  const expected = options.credential === undefined ? undefined : Buffer.from(options.credential, "latin1");
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const refused = refuseWithoutCredential(req, expected);
    if (refused) {
      req.resume();
      res.writeHead(refused.status, { ...refused.headers, "content-length": String(refused.body.length) });
      res.end(req.method === "HEAD" ? undefined : refused.body);
      return;
    }
    const requestId = `req-${++counter}`;
    void wrap(requestId, () => handleLbRequest(routes, req)).then(
      (response) => {
        if (response.stream) {
          res.writeHead(response.status, response.headers);
          if (req.method === "HEAD") {
            res.end();
            return;
          }
          // Headers first: a client of a server-sent-event stream sees the response begin before the first event.
          res.flushHeaders();
          return writeStream(res, response.stream);
        }
        res.writeHead(response.status, { ...response.headers, "content-length": String(response.body.length) });
        res.end(req.method === "HEAD" ? undefined : response.body);
        return undefined;
      },
      (err: unknown) => {
        res.writeHead(500, { "content-type": "application/problem+json" });
        res.end(JSON.stringify({ title: "Internal Server Error", status: 500, detail: errorMessage(err) }));
      },
    );
  };
  const server: Server = createServer(onRequest);
  server.keepAliveTimeout = 65_000;
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  const local = options.socketPath === undefined ? undefined : await listenLocal(server, options.socketPath);
  return {
    address: `http://${shownHost}:${port}`,
    port,
    socket: local ? options.socketPath : undefined,
    ready(loaded) {
      routes = loaded;
    },
    close: () =>
      new Promise<void>((resolve) => {
        local?.close();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

/**
 * The same HTTP server on a Unix socket too: its connections are the HTTP server's. Undefined when it cannot
 * listen there (the service then keeps to TCP; the worker says which in its registration).
 */
async function listenLocal(server: Server, path: string): Promise<NetServer | undefined> {
  const local = createNetServer((socket) => server.emit("connection", socket));
  // A file left by a worker of the same id that was killed: the path is this worker's alone.
  rmSync(path, { force: true });
  return new Promise((resolve) => {
    local.once("error", () => resolve(undefined));
    local.listen(path, () => resolve(local));
  });
}

/**
 * Whether the artifact's manifest marks `endpointName` load-balanced. Read before the handler is
 * imported so the worker can answer /ping (204, initializing) while it loads.
 */
export async function isLoadBalancedEndpoint(artifactDir: string, endpointName: string): Promise<boolean> {
  try {
    const manifest = JSON.parse(await readFile(join(artifactDir, MANIFEST_FILE), "utf8")) as Manifest;
    return manifest.resources?.[endpointName]?.is_load_balanced === true;
  } catch {
    return false;
  }
}
