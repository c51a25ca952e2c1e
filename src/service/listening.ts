// The HTTP listener's edges: listening (a port in use said as such), requests Node could not parse answered with a
// problem, a request's log fields, and bodies read within a time limit.

import { type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { problemResponse } from "./http/problems.js";
import { ServiceMetrics } from "./metrics/index.js";
import type { LogFields } from "./logging.js";

/**
 * Requests Node's parser refuses (headers over 16 KiB, a method it does not know, bad framing) get a
 * problem+json answer too, instead of Node's bare status line; so does CONNECT, which asks for a tunnel.
 */
export function answerUnparsedRequests(server: Server): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: { headersSent?: boolean } }) => {
    // As Node's own handler: nothing to say on a reset socket or once an answer has started.
    if (!socket.writable || err.code === "ECONNRESET" || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const detail =
      status === 431
        ? "The request's headers are larger than the limit of 16 KiB"
        : status === 408
          ? "The request's headers did not arrive in time"
          : `The request is not valid HTTP (${err.code ?? err.message})`;
    socket.end(problemResponse(status, detail, "connection: close\r\n"));
  });
  // This service is no proxy. Node hands CONNECT only to a 'connect' listener and, without one, closes the
  // socket with no answer.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy()); // the client went away: nothing to answer
    socket.end(
      problemResponse(
        405,
        "CONNECT is not supported: this service is not a proxy",
        "allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\nconnection: close\r\n",
      ),
    );
  });
}
/** What a request's log line says of it: the id a proxy or client gave it (x-request-id), when there is one. */
export function requestFields(req: IncomingMessage): LogFields | undefined {
  const id = req.headers["x-request-id"];
  return typeof id === "string" && id !== "" ? { requestId: id } : undefined;
}
/** A job API read the LB front answers itself, counted as the dispatcher counts it (one it gives up is counted there). */
export function timedRead(
  metrics: ServiceMetrics,
  endpointId: string,
  jobId: string | undefined,
  answer: string | Promise<string | undefined> | undefined,
): string | Promise<string | undefined> | undefined {
  if (answer === undefined || !metrics.prometheus) return answer;
  const started = performance.now();
  const route = jobId === undefined ? "/v2/:endpoint/health" : "/v2/:endpoint/status/:job";
  if (typeof answer === "string") {
    metrics.request("GET", route, 200, started, endpointId);
    return answer;
  }
  return answer.then((text) => {
    if (text !== undefined) metrics.request("GET", route, 200, started, endpointId);
    return text;
  });
}
/** Listen on host:port; a failure (the port taken) leaves the server not listening. */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
