// The node:http fallback for forwarding one request to a load-balanced worker's HTTP server and its answer back,
// streamed both ways: the request body is piped up as it arrives and the response is piped down as the worker
// writes it (chunked and server-sent events arrive as produced). No retry: a worker that fails mid-request gives a
// 502 problem. The usual path writes the request on a pooled raw socket instead (exchange.ts over upstream.ts);
// this one serves https workers and node versions whose HTTP parser is not reachable.

import { request as httpRequest, Agent, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { sendProblem } from "../http/problems.js";
import { HOP_BY_HOP } from "./head-scan.js";
import type { UpstreamAddress } from "./upstream.js";
import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";

function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const listed = headers.connection;
  return new Set(
    (typeof listed === "string" ? listed : "")
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
}

/**
 * The headers sent up to the worker: the caller's, less the connection-scoped ones, the key and any worker
 * credential of its own; the worker's `credential` (undefined: it asks none) and X-Forwarded-*. Pure.
 */
export function upstreamHeaders(
  incoming: IncomingHttpHeaders,
  info: { host?: string; remote?: string; endpointId: string; credential?: string },
): OutgoingHttpHeaders {
  const drop = connectionListed(incoming);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name) || name === "authorization" || name === LB_CREDENTIAL_HEADER) continue;
    out[name] = value;
  }
  if (info.credential !== undefined) out[LB_CREDENTIAL_HEADER] = info.credential;
  if (info.host) out["x-forwarded-host"] = info.host;
  if (info.remote) out["x-forwarded-for"] = typeof incoming["x-forwarded-for"] === "string" ? `${incoming["x-forwarded-for"]}, ${info.remote}` : info.remote;
  out["x-forwarded-proto"] = "http";
  return out;
}

/** The headers sent down to the caller, naming the worker. Pure. */
export function downstreamHeaders(upstream: IncomingHttpHeaders, workerId: string): OutgoingHttpHeaders {
  const drop = connectionListed(upstream);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name)) continue;
    out[name] = value;
  }
  out["x-svc-worker"] = workerId;
  return out;
}

/** "timed-out": the worker did not begin its answer within the endpoint's executionTimeout (a 504; it stays in the pool). */
export type ProxyOutcome = "ok" | "worker-failed" | "client-gone" | "timed-out";

/** One keep-alive pool for every worker: a connection per in-flight request, reused across requests. */
export function proxyAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, scheduling: "lifo" });
}

/**
 * Send `req` (its body not yet read) to the worker at `upstream` with `path` (always origin-form, "/..."; it only
 * ever lands in the request line, so it cannot redirect the request elsewhere), and the answer to `res`. Resolves
 * when the exchange is over. A worker failure before its status line is a 502 problem+json; after it, the
 * response is cut.
 */
export function forward(
  agent: Agent,
  req: IncomingMessage,
  res: ServerResponse,
  target: { upstream: UpstreamAddress; path: string; workerId: string; endpointId: string; credential?: string },
): Promise<ProxyOutcome> {
  return new Promise<ProxyOutcome>((resolve) => {
    let settled = false;
    const settle = (outcome: ProxyOutcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const upstream = httpRequest(
      {
        protocol: target.upstream.protocol,
        hostname: target.upstream.hostname,
        port: target.upstream.port,
        method: req.method,
        path: target.path,
        agent,
        headers: upstreamHeaders(req.headers, {
          host: req.headers.host,
          remote: req.socket.remoteAddress,
          endpointId: target.endpointId,
          credential: target.credential,
        }),
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, downstreamHeaders(answer.headers, target.workerId));
        // Streamed answers: headers go out now, each chunk as it comes (pipe writes without buffering).
        if (answer.headers["content-length"] === undefined) res.flushHeaders();
        answer.pipe(res);
        answer.once("end", () => settle("ok"));
        answer.on("error", () => {
          res.destroy();
          settle("worker-failed");
        });
        answer.on("close", () => {
          if (answer.complete) return;
          res.destroy();
          settle("worker-failed");
        });
      },
    );
    upstream.on("error", (err) => {
      if (settled) return;
      // (req.destroyed says nothing here: a request whose body was read is destroyed already.)
      if (res.destroyed) return settle("client-gone");
      if (!res.headersSent) {
        req.resume();
        sendProblem(res, 502, `The worker ${target.workerId} failed while handling the request (${err.message}); it was not retried`, {
          headers: { "x-svc-worker": target.workerId },
        });
      } else res.destroy();
      settle("worker-failed");
    });
    // The caller went away: stop the worker's side too.
    res.on("close", () => {
      if (!res.writableFinished) {
        upstream.destroy();
        settle("client-gone");
      }
    });
    // A request without a body (most GETs) is sent at once; one with a body streams up as it arrives.
    if (req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined) {
      req.resume();
      upstream.end();
    } else req.pipe(upstream);
  });
}
