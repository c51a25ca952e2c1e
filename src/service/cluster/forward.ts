// A replica that does not serve jobs passes job traffic to the one that does, so that clients and workers may
// talk to any replica (behind one address that spreads connections over them). The request goes as it came
// (method, path, Host, headers, body streamed), the answer comes back as the jobs replica gave it (status,
// headers, body streamed: /runsync waits, /stream and log follows work unchanged). Hop-by-hop headers stay on
// their hop. A jobs replica that does not answer is a 503 naming it.

import { Agent, request, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import { Refusal } from "../../errors.js";
import { JOBS_REPLICA_HEADER } from "../../runtime/api.js";

/** Headers that belong to one connection, not to the request (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

/** The request's headers as they go to the next hop. Pure. */
export function forwardedHeaders(headers: IncomingMessage["headers"], remoteAddress: string | undefined): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  const prior = headers["x-forwarded-for"];
  if (remoteAddress) out["x-forwarded-for"] = prior ? `${prior}, ${remoteAddress}` : remoteAddress;
  return out;
}

export interface ForwardOptions {
  /** Name the jobs replica in the answer (a worker's call): the worker may then reach it without this hop. */
  nameTarget?: boolean;
}

/** Pass `req` to the replica at `target` (its base URL) and its answer back through `res`. */
export function forwardRequest(target: string, req: IncomingMessage, res: ServerResponse, options: ForwardOptions = {}): Promise<void> {
  const base = new URL(target);
  return new Promise<void>((resolve, reject) => {
    const upstream = request(
      {
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        method: req.method,
        path: req.url,
        headers: forwardedHeaders(req.headers, req.socket.remoteAddress),
        agent,
      },
      (answer) => {
        const headers: OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
        if (options.nameTarget) headers[JOBS_REPLICA_HEADER] = target;
        res.writeHead(answer.statusCode ?? 502, headers);
        answer.pipe(res);
        answer.once("end", () => resolve());
        // The jobs replica went away mid-answer: the client sees its connection end short, as with any proxy.
        answer.once("error", () => {
          res.destroy();
          resolve();
        });
      },
    );
    upstream.once("error", (err) => {
      if (res.headersSent) {
        res.destroy();
        resolve();
        return;
      }
      reject(
        new Refusal(
          "unavailable",
          `The replica serving jobs at ${target} does not answer (${(err as NodeJS.ErrnoException).code ?? err.message}); retry in a few seconds`,
          { retryAfterS: 5 },
        ),
      );
    });
    // A client that goes away stops the forwarded request too (a /runsync wait, a follow).
    res.once("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
}
