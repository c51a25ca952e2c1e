// The S3 API's own origin: a listener of its own (`svc server --s3-port`), apart from the console and the job
// API, so that a tenant's object is never served from the origin where the console keeps an operator's key, and
// clients that cannot put a path before the bucket (rclone, s3cmd) address buckets at the root. docs/volumes.md.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** The S3 port `svc server` and `svc dev` take without `--s3-port`: the next port, or any free one with port 0. Pure. */
export function defaultS3Port(servicePort: number): number {
  return servicePort === 0 ? 0 : servicePort + 1;
}

/**
 * The address S3 clients are given: the one the operator named, else the service's public address with the S3
 * port instead of its own, else the listening one. Pure.
 */
export function s3OriginUrl(opts: { listening: string; port: number; publicUrl?: string; s3PublicUrl?: string }): string {
  if (opts.s3PublicUrl) return opts.s3PublicUrl.replace(/\/+$/, "");
  if (opts.publicUrl) {
    const url = new URL(opts.publicUrl);
    url.port = String(opts.port);
    return url.origin;
  }
  return opts.listening;
}

/** The S3 API could not listen on its port; `code` is the listen error's (EADDRINUSE: the port is taken). */
export class S3ListenError extends Error {
  constructor(
    readonly port: number,
    readonly code: string | undefined,
    cause: unknown,
  ) {
    super(`The S3 API cannot listen on port ${port}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export interface S3Origin {
  port: number;
  /** The address S3 clients are given (s3OriginUrl). */
  url: string;
  close(): Promise<void>;
}

/**
 * Listen for the S3 API on host:port and hand every request to `serve`. A failure to listen (the port taken)
 * rejects with an S3ListenError, leaving nothing open.
 */
export async function listenS3Origin(
  opts: { host: string; port: number; publicUrl?: string; s3PublicUrl?: string; keepAliveMs: number },
  serve: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<S3Origin> {
  const server: Server = createServer(serve);
  server.keepAliveTimeout = opts.keepAliveMs;
  server.headersTimeout = opts.keepAliveMs + 5_000;
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => reject(new S3ListenError(opts.port, err.code, err));
    server.once("error", failed);
    server.listen(opts.port, opts.host, () => {
      server.off("error", failed);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host === "0.0.0.0" || opts.host === "::" ? "127.0.0.1" : opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    port,
    url: s3OriginUrl({ listening: `http://${host}:${port}`, port, publicUrl: opts.publicUrl, s3PublicUrl: opts.s3PublicUrl }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        // Requests in flight get a moment, as on the service's own port; then their connections go.
        setTimeout(() => server.closeAllConnections(), 200).unref();
      }),
  };
}
