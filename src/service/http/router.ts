// A route table and its matcher: every route of the service is one row declaring its methods, path pattern,
// who may call it, how its body is read and where it is served; one dispatcher (api.ts) applies the rows.
//
// Patterns are paths of literal segments, `:name` (one segment) and a trailing `*name` (the rest, possibly
// empty): "/v2/:endpoint/status/:job", "/v2/:endpoint/openai/*rest". A path belongs to the first pattern in
// table order that matches it; every row with that same pattern offers its methods there, and any other method
// is 405 with those in `Allow`. Matching is pure; nothing here touches a request.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { HttpProblem } from "./problems.js";
import type { RequestTarget } from "./wire.js";

/** Who may call a route: a user's key, a worker's token, or either. */
export type RouteAuth = "user" | "worker" | "any";

/**
 * How a route's request body is read. A number: at most that many bytes, read when the handler asks for it
 * (`body()`), drained when it does not. "none": drained before the handler runs. "handler": the handler reads
 * the stream itself, with its own limits (uploads, the families that read their own bodies).
 */
export type RouteBody = number | "none" | "handler";

export interface RouteRow<H> {
  methods: readonly string[];
  pattern: string;
  auth: RouteAuth;
  /** The key may come bare, without "Bearer" (the job API's examples send it so). */
  bareKey?: boolean;
  body: RouteBody;
  /** Counted against the caller's rate limits (workers never are). */
  rateLimited: boolean;
  /**
   * Served by the replica that serves jobs, on any request method (a replica that does not forwards it there).
   * A function decides by the query. Requests that change something go there whatever this says.
   */
  jobsReplica?: boolean | ((query: URLSearchParams) => boolean);
  /** A replica that does not serve jobs answers it itself when it can hand jobs off (ctx.handOffAs). */
  handedOff?: boolean;
  /** What a caller of the wrong kind is told it cannot do ("call the job API"). */
  purpose?: string;
  handler: H;
}

/**
 * One authenticated request, matched to its route row, as the dispatcher (api.ts) prepared it. `ctx`: the parts
 * of the service the row's feature declared it needs (its own narrow interface, `D`), never the whole service.
 */
export interface RouteCall<D> {
  ctx: D;
  req: IncomingMessage;
  res: ServerResponse;
  url: RequestTarget;
  /** The pattern's parameters, percent-decoded (`:endpoint`, `*rest`...). */
  params: Record<string, string>;
  principal: Principal;
  /** The body parsed as JSON (undefined when empty), read within the row's limit: 413, 415 and 400 otherwise. */
  json(): Promise<unknown>;
  /**
   * Set when the dispatcher chose to answer this `/run` here, on a replica that does not serve jobs, by handing its
   * job off under this replica's name (api.ts handedOffHere).
   */
  handOffAs?: string;
}

export type RouteHandler<D> = (call: RouteCall<D>) => Promise<void> | void;

/** A feature's route row over its dependencies `D`; api.ts joins every feature's rows into one table. */
export type Route<D> = RouteRow<RouteHandler<D>>;

interface Compiled<H> {
  row: RouteRow<H>;
  parts: Array<{ literal: string } | { param: string } | { rest: string }>;
}

export interface RouteMatch<H> {
  /** The rows sharing the matched pattern (one per method group). */
  rows: Array<RouteRow<H>>;
  params: Record<string, string>;
}

export class RouteTable<H> {
  private readonly compiled: Array<Compiled<H>>;

  constructor(readonly rows: ReadonlyArray<RouteRow<H>>) {
    this.compiled = rows.map((row) => ({ row, parts: compilePattern(row.pattern) }));
  }

  /**
   * The rows whose pattern `pathname` belongs to, with its parameters, or undefined. Segments are compared
   * percent-decoded; a path that is not valid percent-encoding throws URIError.
   */
  match(pathname: string): RouteMatch<H> | undefined {
    const segments = pathname.split("/").filter(Boolean).map(decodeURIComponent);
    for (const c of this.compiled) {
      const params = matchParts(c.parts, segments);
      if (!params) continue;
      return { rows: this.compiled.filter((o) => o.row.pattern === c.row.pattern).map((o) => o.row), params };
    }
    return undefined;
  }
}

/** The row of a match serving `method` (HEAD is served by GET rows), or the 405 problem naming the allowed ones. */
export function rowFor<H>(match: RouteMatch<H>, method: string | undefined): RouteRow<H> {
  const m = method ?? "GET";
  const row = match.rows.find((r) => r.methods.includes(m)) ?? (m === "HEAD" ? match.rows.find((r) => r.methods.includes("GET")) : undefined);
  if (row) return row;
  const allowed = [...new Set(match.rows.flatMap((r) => r.methods))];
  throw new HttpProblem(405, `${m} is not allowed here; use ${allowed.join(" or ")}`, { headers: { allow: allowed.join(", ") } });
}

function compilePattern(pattern: string): Compiled<unknown>["parts"] {
  const parts = pattern.split("/").filter(Boolean);
  return parts.map((p, i) => {
    if (p.startsWith("*")) {
      if (i !== parts.length - 1) throw new Error(`route pattern ${pattern}: a rest parameter must come last`);
      return { rest: p.slice(1) };
    }
    return p.startsWith(":") ? { param: p.slice(1) } : { literal: p };
  });
}

function matchParts(parts: Compiled<unknown>["parts"], segments: string[]): Record<string, string> | undefined {
  const last = parts[parts.length - 1];
  const hasRest = last !== undefined && "rest" in last;
  if (hasRest ? segments.length < parts.length - 1 : segments.length !== parts.length) return undefined;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if ("literal" in p && segments[i] !== p.literal) return undefined;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if ("param" in p) params[p.param] = segments[i]!;
    else if ("rest" in p) params[p.rest] = segments.slice(i).join("/");
  }
  return params;
}
