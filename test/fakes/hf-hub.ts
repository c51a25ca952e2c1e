// A FAKE Hugging Face hub for tests: it stands in for huggingface.co (there is no internet here) and serves the
// routes huggingface_hub and svc's model cache read, with the headers the real hub sends:
//   GET /api/models/{org}/{name}/revision/{revision}   {"sha", "siblings": [{rfilename, size, blobId, lfs}]}
//   HEAD|GET /{org}/{name}/resolve/{revision}/{file}   the bytes (Range honoured), X-Repo-Commit, ETag,
//                                                      X-Linked-Etag and X-Linked-Size (LFS files)
// Tests count its requests, cut a download short, corrupt a file's bytes, or slow it down.

import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeHubFile {
  name: string;
  content: Buffer;
  /** Stored in LFS: listed with its sha256, its etag is the sha256. Else its etag is its git blob id. */
  lfs?: boolean;
}

export interface FakeHubRequest {
  method: string;
  path: string;
  range?: string;
  authorization?: string;
}

export interface FakeHub {
  url: string;
  requests: FakeHubRequest[];
  /** Add a repository's revision: its commit (40 hex digits) and files; `refs` name it (e.g. "main"). */
  add(repo: string, commit: string, files: FakeHubFile[], refs?: string[]): void;
  /** The next GET of this file sends only this many bytes, then breaks the connection. */
  cutAfter(file: string, bytes: number): void;
  /** Serve this file's bytes with one byte changed (its listing keeps the true hash). */
  corrupt(file: string): void;
  /** Send bytes at most this fast (bytes per second) from now on; undefined: at full speed. */
  throttle(bytesPerSecond: number | undefined): void;
  /** Answer every request with this status (503: the hub is down); undefined: serve. */
  failWith(status: number | undefined): void;
  close(): Promise<void>;
}

export const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
export const gitBlobId = (b: Buffer) => createHash("sha1").update(`blob ${b.length}\0`).update(b).digest("hex");

export async function startFakeHub(): Promise<FakeHub> {
  const repos = new Map<string, { commits: Map<string, FakeHubFile[]>; refs: Map<string, string> }>();
  const requests: FakeHubRequest[] = [];
  const cuts = new Map<string, number>();
  const corrupted = new Set<string>();
  let rate: number | undefined;
  let failing: number | undefined;

  const resolveRevision = (repo: string, revision: string) => {
    const r = repos.get(repo);
    if (!r) return undefined;
    const commit = r.commits.has(revision) ? revision : r.refs.get(revision);
    return commit === undefined ? undefined : { commit, files: r.commits.get(commit)! };
  };
  // Each file's hashes once, not at every request (a bench serves 200 MB files: hashing them per request would be
  // the stand-in's cost, not the client's).
  const hashes = new WeakMap<Buffer, { sha256: string; blobId: string }>();
  const hashesOf = (content: Buffer) => {
    let h = hashes.get(content);
    if (!h) hashes.set(content, (h = { sha256: sha256(content), blobId: gitBlobId(content) }));
    return h;
  };
  const etagOf = (f: FakeHubFile) => (f.lfs ? hashesOf(f.content).sha256 : hashesOf(f.content).blobId);

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://hub");
    const path = decodeURIComponent(url.pathname);
    requests.push({
      method: req.method ?? "GET",
      path,
      ...(req.headers.range ? { range: req.headers.range } : {}),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    });
    if (failing !== undefined) {
      res.writeHead(failing, { "content-type": "application/json" }).end(JSON.stringify({ error: "unavailable" }));
      return;
    }
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path);
    if (api) {
      const found = resolveRevision(api[1]!, api[2]!);
      if (!found) {
        res.writeHead(404, { "content-type": "application/json", "x-error-code": "RevisionNotFound" }).end(JSON.stringify({ error: "Revision Not Found" }));
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: api[1],
          modelId: api[1],
          sha: found.commit,
          siblings: found.files.map((f) => ({
            rfilename: f.name,
            size: f.content.length,
            blobId: hashesOf(f.content).blobId,
            ...(f.lfs ? { lfs: { sha256: hashesOf(f.content).sha256, size: f.content.length, pointerSize: 134 } } : {}),
          })),
        }),
      );
      return;
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    const found = resolve && resolveRevision(resolve[1]!, resolve[2]!);
    const file = found?.files.find((f) => f.name === resolve![3]);
    if (!found || !file) {
      res.writeHead(404, { "x-error-code": "EntryNotFound" }).end("Entry not found");
      return;
    }
    let body = file.content;
    if (corrupted.has(file.name)) {
      body = Buffer.from(body);
      body[0] = body[0]! ^ 0xff;
    }
    const headers: Record<string, string | number> = {
      "x-repo-commit": found.commit,
      etag: `"${etagOf(file)}"`,
      "accept-ranges": "bytes",
      "content-type": "application/octet-stream",
      ...(file.lfs ? { "x-linked-etag": `"${hashesOf(file.content).sha256}"`, "x-linked-size": file.content.length } : {}),
    };
    let start = 0;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    if (range) start = Number(range[1]);
    if (start > body.length) {
      res.writeHead(416, { "content-range": `bytes */${body.length}` }).end();
      return;
    }
    const slice = body.subarray(start);
    if (range) res.writeHead(206, { ...headers, "content-length": slice.length, "content-range": `bytes ${start}-${body.length - 1}/${body.length}` });
    else res.writeHead(200, { ...headers, "content-length": slice.length });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const cut = cuts.get(file.name);
    if (cut !== undefined) cuts.delete(file.name);
    void send(slice, cut, res, req.socket);
  });

  const send = async (slice: Buffer, cut: number | undefined, res: import("node:http").ServerResponse, socket: import("node:net").Socket) => {
    const chunk = 64 * 1024;
    let sent = 0;
    while (sent < slice.length) {
      const n = Math.min(chunk, slice.length - sent, cut === undefined ? Infinity : cut - sent);
      if (n <= 0) break;
      const ok = res.write(slice.subarray(sent, sent + n));
      sent += n;
      if (!ok) await new Promise((r) => res.once("drain", r));
      if (rate !== undefined) await new Promise((r) => setTimeout(r, (n / rate!) * 1000));
    }
    if (cut !== undefined && sent < slice.length) {
      // Let what was written reach the client, then break the connection mid-body.
      await new Promise((r) => setTimeout(r, 50));
      socket.destroy();
      return;
    }
    res.end();
  };

  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    add(repo, commit, files, refs = ["main"]) {
      const r = repos.get(repo) ?? { commits: new Map(), refs: new Map() };
      r.commits.set(commit, files);
      for (const ref of refs) r.refs.set(ref, commit);
      repos.set(repo, r);
    },
    cutAfter: (file, bytes) => cuts.set(file, bytes),
    corrupt: (file) => corrupted.add(file),
    throttle: (bps) => (rate = bps),
    failWith: (status) => (failing = status),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
