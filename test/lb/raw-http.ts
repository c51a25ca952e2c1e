// A raw HTTP/1.1 connection for the LB front's tests: they say which connection carries which request, and
// reuse, pipelining and split writes are then what the test says they are.

import { connect, type Socket } from "node:net";

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A raw HTTP/1.1 connection: write bytes, read whole answers (content-length or chunked) in order. */
export class Raw {
  readonly socket: Socket;
  private data = Buffer.alloc(0);
  private waiters: Array<() => void> = [];
  closed = false;

  /** `target`: the port of a service on 127.0.0.1, or a socket already open. */
  constructor(target: number | Socket) {
    this.socket = typeof target === "number" ? connect(target, "127.0.0.1") : target;
    this.socket.on("data", (chunk: Buffer) => {
      this.data = Buffer.concat([this.data, chunk]);
      this.wake();
    });
    this.socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  send(text: string | Buffer): void {
    this.socket.write(text);
  }

  /** The next whole answer (a HEAD request's has no body: pass `head`). */
  async answer(head = false): Promise<Answer> {
    for (;;) {
      const parsed = this.parse(head);
      if (parsed) return parsed;
      if (this.closed) throw new Error(`connection closed; unparsed: ${this.data.toString("latin1").slice(0, 200)}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private parse(head: boolean): Answer | undefined {
    const end = this.data.indexOf("\r\n\r\n");
    if (end < 0) return undefined;
    const lines = this.data.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(lines[0]!.split(" ")[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const i = line.indexOf(":");
      const name = line.slice(0, i).toLowerCase();
      headers[name] = headers[name] === undefined ? line.slice(i + 1).trim() : `${headers[name]}, ${line.slice(i + 1).trim()}`;
    }
    let offset = end + 4;
    let body = Buffer.alloc(0);
    if (head || status === 204 || status === 304) {
      // no body
    } else if (headers["transfer-encoding"] === "chunked") {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = this.data.indexOf("\r\n", offset);
        if (lineEnd < 0) return undefined;
        const size = parseInt(this.data.subarray(offset, lineEnd).toString("latin1"), 16);
        if (this.data.length < lineEnd + 2 + size + 2) return undefined;
        parts.push(this.data.subarray(lineEnd + 2, lineEnd + 2 + size));
        offset = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
    } else {
      const length = Number(headers["content-length"] ?? 0);
      if (this.data.length < offset + length) return undefined;
      body = this.data.subarray(offset, offset + length);
      offset += length;
    }
    this.data = this.data.subarray(offset);
    return { status, headers, body };
  }

  close(): void {
    this.socket.destroy();
  }
}
