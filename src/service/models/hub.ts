// A Hugging Face-compatible hub, as the model cache reads it (the routes huggingface_hub itself uses):
//   GET  {hub}/api/models/{repo}/revision/{revision}?blobs=true   the revision's commit ("sha") and files
//        ("siblings": rfilename, size, blobId, lfs.sha256)
//   GET  {hub}/{repo}/resolve/{commit}/{file}                      the file's bytes (Range honoured; a redirect to
//        a CDN followed), with X-Repo-Commit, ETag / X-Linked-Etag and X-Linked-Size
// The hub's address is a setting (a mirror or an air-gapped copy serves); a token is sent as a bearer when given.

import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import type { ModelRef } from "svc/internal";
import type { ModelFetchCode } from "../http/answers.js";
import type { ModelFile, ModelListing } from "./layout.js";
import { receiveInto } from "./receive.js";
import { socketGet } from "./socket-get.js";

/**
 * Files at least this large are received on a socket of their own (socket-get.ts); smaller ones through node:http,
 * whose kept-alive connections save a model's many small files a connection each.
 */
const SOCKET_GET_BYTES = 8 * 1024 * 1024;

/** A file's answer, its body not yet read. */
export interface FileDownload {
  /** Whether the hub sent the file from the offset asked (206), not from its start. */
  resumed: boolean;
  /**
   * The body into the file at `path` from byte `start` on (the file cut there first; 0: a new file): `take` sees each
   * part before it is written (false: dropped), `written` hears how far the file is whole on disk (receive.ts).
   */
  receive(path: string, start: number, take: (bytes: Buffer) => boolean, written?: (bytes: number) => void): Promise<void>;
}

/** The hub models are fetched from unless the operator names another (SVC_MODEL_HUB). */
export const DEFAULT_MODEL_HUB = "https://huggingface.co";

// Why a model could not be fetched, as a code a program acts on: part of `GET /v1/models`'s answer.
export type { ModelFetchCode };

export class ModelFetchError extends Error {
  constructor(
    readonly code: ModelFetchCode,
    message: string,
  ) {
    super(message);
    this.name = "ModelFetchError";
  }
}

export interface HubOptions {
  /** The hub's base address, e.g. https://huggingface.co or a mirror's. */
  url: string;
  token?: string;
  /** How long a request may go without a byte before it is abandoned (and resumed), ms. */
  idleTimeoutMs?: number;
  /** Files at least this large are received on a socket of their own; default SOCKET_GET_BYTES. */
  socketGetBytes?: number;
}

interface Sibling {
  rfilename?: unknown;
  size?: unknown;
  blobId?: unknown;
  lfs?: { sha256?: unknown; size?: unknown } | null;
}

const encodePath = (path: string) => path.split("/").map(encodeURIComponent).join("/");

export class Hub {
  constructor(private readonly options: HubOptions) {}

  get url(): string {
    return this.options.url.replace(/\/+$/, "");
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}), "user-agent": "svc-model-cache", ...extra };
  }

  private async request(url: string, init: RequestInit, what: string): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(url, { ...init, headers: this.headers(init.headers as Record<string, string> | undefined) });
    } catch (err) {
      throw new ModelFetchError("hub_unreachable", `the hub at ${this.url} did not answer ${what} (${causeOf(err)})`);
    }
    if (res.ok) return res;
    // The body of a refused answer is only released here; failing to release it changes nothing the error below says.
    await res.body?.cancel().catch(() => undefined);
    throw refusal(res.status, what);
  }

  /** A revision's commit and files (sizes and the hashes the hub gives). */
  async listing(ref: ModelRef): Promise<ModelListing> {
    const url = `${this.url}/api/models/${encodePath(ref.repo)}/revision/${encodeURIComponent(ref.revision)}?blobs=true`;
    const res = await this.request(url, {}, `the revision ${ref.repo}@${ref.revision}`);
    let body: { sha?: unknown; siblings?: unknown };
    try {
      body = (await res.json()) as typeof body;
    } catch (err) {
      throw new ModelFetchError("bad_listing", `the hub's listing of ${ref.repo}@${ref.revision} is not JSON (${causeOf(err)})`);
    }
    if (typeof body.sha !== "string" || !Array.isArray(body.siblings))
      throw new ModelFetchError("bad_listing", `the hub's listing of ${ref.repo}@${ref.revision} has no "sha" and "siblings"`);
    const commit = body.sha;
    const files: ModelFile[] = [];
    for (const s of body.siblings as Sibling[]) {
      if (typeof s.rfilename !== "string")
        throw new ModelFetchError("bad_listing", `the hub's listing of ${ref.repo}@${ref.revision} has a file without a name`);
      const sha256 = typeof s.lfs?.sha256 === "string" ? s.lfs.sha256 : undefined;
      const size = typeof s.lfs?.size === "number" ? s.lfs.size : typeof s.size === "number" ? s.size : undefined;
      const etag = sha256 ?? (typeof s.blobId === "string" ? s.blobId : undefined);
      if (etag !== undefined && size !== undefined) files.push({ name: s.rfilename, size, etag, ...(sha256 ? { sha256 } : {}) });
      else files.push(await this.head(ref.repo, commit, s.rfilename));
    }
    return { commit, files };
  }

  /** A file's etag and size from its resolve route's headers (a hub whose listing leaves them out). */
  private async head(repo: string, commit: string, name: string): Promise<ModelFile> {
    const res = await this.request(
      this.fileUrl(repo, commit, name),
      { method: "HEAD", redirect: "manual", headers: { "accept-encoding": "identity" } },
      `the file ${name} of ${repo}`,
    );
    const etag = (res.headers.get("x-linked-etag") ?? res.headers.get("etag") ?? "").replace(/^W\//, "").replace(/"/g, "");
    const size = Number(res.headers.get("x-linked-size") ?? res.headers.get("content-length"));
    const lfs = /^[0-9a-f]{64}$/.test(etag);
    return { name, size, etag, ...(lfs ? { sha256: etag } : {}) };
  }

  fileUrl(repo: string, commit: string, name: string): string {
    return `${this.url}/${encodePath(repo)}/resolve/${commit}/${encodePath(name)}`;
  }

  /**
   * A file's answer from `offset` on (a Range request when it is past 0), redirects followed. A file of `size` bytes
   * past SOCKET_GET_BYTES is received on a socket of its own (unless the hub answers it chunked or encoded), others
   * through node:http; fetch's web stream costs more than the network at these sizes.
   */
  async download(repo: string, commit: string, name: string, offset: number, size: number): Promise<FileDownload> {
    const headers: Record<string, string> = this.headers({ "accept-encoding": "identity", ...(offset > 0 ? { range: `bytes=${offset}-` } : {}) });
    const url = this.fileUrl(repo, commit, name);
    const what = `the file ${name} of ${repo}`;
    const idleMs = this.options.idleTimeoutMs ?? 60_000;
    const served = <T>(answer: Answer<T>): Answer<T> => {
      const commitHeader = answer.headers["x-repo-commit"];
      if (typeof commitHeader !== "string" || commitHeader === commit) return answer;
      answer.discard();
      throw new ModelFetchError("hub_error", `the hub served ${name} of ${repo} from commit ${commitHeader}, not ${commit}`);
    };
    if (size - offset >= (this.options.socketGetBytes ?? SOCKET_GET_BYTES)) {
      const answer = await this.follow(url, headers, what, async (target, sent) => {
        const got = await socketGet(target, sent, idleMs);
        return { status: got.status, headers: got.headers, discard: got.close, body: got };
      });
      if (answer.body.plainBody) {
        served(answer);
        return { resumed: offset > 0 && answer.status === 206, receive: answer.body.receive };
      }
      // Chunked or encoded: through node:http.
      answer.discard();
    }
    const answer = served(await this.follow(url, headers, what, (target, sent) => httpAnswer(target, sent, idleMs)));
    return {
      resumed: offset > 0 && answer.status === 206,
      receive: (path, start, take, written) => receiveInto(answer.body, path, start, take, written),
    };
  }

  /**
   * A GET's answer through `send`, redirects followed (the Hub sends LFS files from a CDN: the token is not sent to
   * another origin), refusals as the errors `request` gives.
   */
  private async follow<T>(url: string, headers: Record<string, string>, what: string, send: Send<T>, redirectsLeft = 5): Promise<Answer<T>> {
    const target = new URL(url);
    let answer: Answer<T>;
    try {
      answer = await send(target, headers);
    } catch (err) {
      throw new ModelFetchError("hub_unreachable", `the hub at ${this.url} did not answer ${what} (${causeOf(err)})`);
    }
    const location = answer.headers.location;
    if (answer.status >= 300 && answer.status < 400 && typeof location === "string" && redirectsLeft > 0) {
      answer.discard();
      const next = new URL(location, target);
      const { authorization: _dropped, ...withoutToken } = headers;
      return this.follow(next.href, next.origin === target.origin ? headers : withoutToken, what, send, redirectsLeft - 1);
    }
    if (answer.status >= 200 && answer.status < 300) return answer;
    answer.discard();
    throw refusal(answer.status, what);
  }
}

/** One answer to a GET, its body not yet read, however it was sent (node:http, or a socket of its own). */
interface Answer<T> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Done with it without its body. */
  discard(): void;
  body: T;
}

type Send<T> = (target: URL, headers: Record<string, string>) => Promise<Answer<T>>;

/** A GET through node:http/node:https; a body that stalls for `idleMs` breaks off. */
function httpAnswer(target: URL, headers: Record<string, string>, idleMs: number): Promise<Answer<IncomingMessage>> {
  const get = target.protocol === "https:" ? httpsGet : httpGet;
  return new Promise((resolve, reject) => {
    const req = get(target, { headers }, (res) => resolve({ status: res.statusCode ?? 0, headers: res.headers, discard: () => res.destroy(), body: res }));
    req.on("error", reject);
    req.setTimeout(idleMs, () => req.destroy(new Error(`no byte for ${Math.round(idleMs / 1000)} s`)));
  });
}

/** A hub's refusal of a request as the error the cache reports. */
function refusal(status: number, what: string): ModelFetchError {
  if (status === 401 || status === 403)
    return new ModelFetchError("unauthorized", `the hub refused ${what} (${status}): the model is private or gated; set SVC_MODEL_HUB_TOKEN`);
  if (status === 404) return new ModelFetchError("not_found", `the hub has no ${what.replace(/^the /, "")} (404)`);
  return new ModelFetchError("hub_error", `the hub answered ${what} with ${status}`);
}

function causeOf(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}
