// The host's model cache (docs/models.md): each model revision an endpoint names is fetched once per host from the
// hub, before the workers that need it start, into a cache laid out as huggingface_hub lays out its own (layout.ts);
// workers get it read-only. Downloads are shared (one per file however many endpoints or workers wait for it),
// resume from their partial file with a Range request, and are verified (size, and the sha256 of LFS files or the
// git blob id of others) before they enter the cache; a mismatch leaves nothing behind. Past the size the operator
// sets, the least recently used models go (eviction.ts), never one a running worker uses.

import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  chmodSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { parseModelRef, type ModelRef } from "svc/internal";
import { errorMessage } from "../../errors.js";
import type { ModelStatusAnswer } from "../http/answers.js";
import { planEviction, type CachedModel } from "./eviction.js";
import { type Hub, ModelFetchError, type ModelFetchCode } from "./hub.js";
import { withDirLock } from "./lock.js";
import { type FileCheck, FileHasher } from "./hash-thread.js";
import {
  HUB_DIR,
  INDEX_FILE,
  type ModelFile,
  type ModelListing,
  filePaths,
  listingBytes,
  listingProblems,
  progressText,
  refPath,
  repoFolderName,
  snapshotPath,
} from "./layout.js";

export interface ModelCacheOptions {
  /** The cache's root (HF_HOME); huggingface_hub's cache is its hub/ folder. */
  root: string;
  hub: Hub;
  /** Evict least recently used models past this many bytes; undefined: never. */
  limitBytes?: number;
  /** An operator message. */
  onEvent?(message: string): void;
  /** A fetch ended (done or failed): the workers waiting for it may start, or the endpoint says why not. */
  onChange?(): void;
  /** The first wait before a failed fetch is tried again, ms (doubling, at most five minutes). */
  retryMs?: number;
  /** Attempts per file when the connection breaks mid-download (each resumes where the last one stopped). */
  attempts?: number;
  /** How long another process's lock on a model may go untouched before this one takes it over, ms. */
  lockStaleMs?: number;
}

/**
 * The hashing thread every cache of this process uses: one thread however many caches (a service has one; `svc
 * models fetch` one; a bench's rounds several in turn, as a service's fetches follow each other).
 */
const sharedHasher = new FileHasher();

/** The folder of the cache's locks between processes (lock.ts): one per model repository. */
export const LOCKS_DIR = "svc-locks";

/** A model as the index keeps it. */
interface IndexEntry {
  repo: string;
  revision: string;
  commit: string;
  bytes: number;
  files: number;
  fetchedAt: number;
  lastUsed: number;
}

/** A model not (yet) in the cache: being fetched, or failed and waiting to be tried again. */
interface Pending {
  ref: ModelRef;
  state: "fetching" | "failed";
  done: number;
  total?: number;
  error?: { code: ModelFetchCode; message: string };
  failures: number;
  retryAt?: number;
}

/** A model of the cache as `svc doctor`, the console and the service's status show it. */
export type ModelStatus = ModelStatusAnswer;

const MAX_RETRY_MS = 5 * 60_000;

export class ModelCache {
  readonly root: string;
  readonly hubDir: string;
  private readonly index = new Map<string, IndexEntry>();
  private readonly pending = new Map<string, Pending>();
  private readonly fetches = new Map<string, Promise<void>>();
  /** One download per blob on this host, whichever models or endpoints want it. */
  private readonly downloads = new Map<string, Promise<void>>();
  /** The models each running worker uses (never evicted while it runs). */
  private readonly holds = new Map<string, string[]>();
  /** Models this process removed: another process's copy of the index does not bring them back. */
  private readonly dropped = new Set<string>();
  /** Models this process downloaded (not found in the cache, nor fetched by another process meanwhile). */
  private readonly downloaded = new Set<string>();

  constructor(private readonly options: ModelCacheOptions) {
    this.root = options.root;
    this.hubDir = join(options.root, HUB_DIR);
    mkdirSync(this.hubDir, { recursive: true, mode: 0o755 });
    // Workers (a container's own user too) read it; only the service writes.
    chmodSync(this.root, 0o755);
    chmodSync(this.hubDir, 0o755);
    mkdirSync(join(this.root, LOCKS_DIR), { recursive: true, mode: 0o755 });
    this.loadIndex();
  }

  get hubUrl(): string {
    return this.options.hub.url;
  }

  get limitBytes(): number | undefined {
    return this.options.limitBytes;
  }

  /** The bytes of the models in the cache. */
  get usedBytes(): number {
    let total = 0;
    for (const e of this.index.values()) total += e.bytes;
    return total;
  }

  /**
   * Whether every one of these models is in the cache. Those that are not are fetched (once, whoever asks), or,
   * after a failure, tried again once their wait is over; `onChange` says when one ends.
   */
  ready(models: readonly string[]): boolean {
    let all = true;
    for (const key of models) {
      if (this.index.has(key)) continue;
      all = false;
      // Dropped here on purpose: ensure() has already recorded the failure (the model's state, its retry time, the
      // endpoint's status reason) and logged it through onEvent; this caller only asks whether the model is there.
      void this.ensure(key).catch(() => undefined);
    }
    return all;
  }

  /**
   * Fetch a model into the cache unless it is there (concurrent callers share one fetch). Rejects with a
   * ModelFetchError when it cannot be fetched; a call before the wait after a failure is over rejects with it again.
   */
  ensure(key: string): Promise<void> {
    if (this.index.has(key)) return Promise.resolve();
    const running = this.fetches.get(key);
    if (running) return running;
    const before = this.pending.get(key);
    if (before?.state === "failed" && before.retryAt !== undefined && Date.now() < before.retryAt)
      return Promise.reject(new ModelFetchError(before.error!.code, before.error!.message));
    const parsed = parseModelRef(key);
    if (!parsed.ref) return Promise.reject(new ModelFetchError("not_found", parsed.problem));
    const p: Pending = { ref: parsed.ref, state: "fetching", done: 0, failures: before?.failures ?? 0 };
    this.pending.set(key, p);
    const fetch = this.fetch(key, p).then(
      () => {
        this.pending.delete(key);
        this.fetches.delete(key);
        this.options.onChange?.();
      },
      (err: unknown) => {
        const e = err instanceof ModelFetchError ? err : new ModelFetchError("disk_error", `could not write the model cache: ${errorMessage(err)}`);
        p.state = "failed";
        p.error = { code: e.code, message: e.message };
        p.failures++;
        p.retryAt = Date.now() + Math.min(MAX_RETRY_MS, (this.options.retryMs ?? 10_000) * 2 ** (p.failures - 1));
        this.fetches.delete(key);
        this.options.onEvent?.(`model ${key} could not be fetched from ${this.hubUrl}: ${e.message}`);
        this.options.onChange?.();
        throw e;
      },
    );
    this.fetches.set(key, fetch);
    return fetch;
  }

  /**
   * Why these models keep an endpoint's workers from starting, in one line ("fetching model org/name@main: 120 of
   * 200 MB"); undefined when none is being fetched or waiting to be tried again.
   */
  reason(models: readonly string[]): string | undefined {
    const lines: string[] = [];
    for (const key of models) {
      if (this.index.has(key)) continue;
      const p = this.pending.get(key);
      // Not asked for yet: fetched when a worker first needs it.
      if (!p) continue;
      if (p.state === "fetching") {
        lines.push(`fetching model ${key}: ${p.total === undefined ? `looking it up on ${this.hubUrl}` : progressText(p.done, p.total)}`);
      } else {
        const wait = Math.max(0, Math.ceil(((p.retryAt ?? 0) - Date.now()) / 1000));
        lines.push(`model ${key} cannot be fetched from ${this.hubUrl}: ${p.error!.message}; trying again in ${wait} s (its jobs wait in the queue)`);
      }
    }
    return lines.length > 0 ? lines.join("; ") : undefined;
  }

  /** Whether any of these models is being downloaded now (not failed, not waiting to be tried again). */
  fetching(models: readonly string[]): boolean {
    return models.some((key) => !this.index.has(key) && this.pending.get(key)?.state === "fetching");
  }

  /** A worker starts with these models: they count as used now, and are not evicted while it runs. */
  hold(workerId: string, models: readonly string[]): void {
    const now = Date.now();
    for (const key of models) {
      const e = this.index.get(key);
      if (e) e.lastUsed = now;
    }
    this.holds.set(workerId, [...models]);
    this.saveIndex();
  }

  /** The worker ended. */
  release(workerId: string): void {
    this.holds.delete(workerId);
  }

  /** Whether this process fetched the model from the hub (rather than finding it in the cache). */
  fetchedHere(key: string): boolean {
    return this.downloaded.has(key);
  }

  /** Every model of the cache and every one being fetched or failed, for `svc doctor` and the status route. */
  list(): ModelStatus[] {
    const inUse = (key: string) => [...this.holds.values()].filter((models) => models.includes(key)).length;
    const ready: ModelStatus[] = [...this.index.entries()].map(([model, e]) => ({
      model,
      state: "ready",
      commit: e.commit,
      bytes: e.bytes,
      lastUsed: e.lastUsed,
      inUse: inUse(model),
    }));
    const pending: ModelStatus[] = [...this.pending.entries()].map(([model, p]) => ({
      model,
      state: p.state,
      doneBytes: p.done,
      ...(p.total !== undefined ? { totalBytes: p.total } : {}),
      inUse: 0,
      ...(p.error ? { error: p.error } : {}),
    }));
    return [...ready, ...pending].sort((a, b) => a.model.localeCompare(b.model));
  }

  // ------------------------------------------------------------------------------------------- fetching

  /**
   * Under the lock of the model's repository, which other processes on this cache (other fetchers on one node)
   * take too: each file is downloaded once, and one that waited finds the model in the index the other wrote.
   * Per repository, not per revision: two revisions of one repository share its blobs folder.
   */
  private async fetch(key: string, p: Pending): Promise<void> {
    // Another process on this cache may have it already: then the hub is not asked at all.
    this.loadIndex();
    if (this.index.has(key)) return;
    // The revision is looked up before the lock: one the hub lacks (or refuses) fails at once, not after another
    // revision's download of the same repository.
    const listing = await this.options.hub.listing(p.ref);
    const problems = listingProblems(listing);
    if (problems.length > 0) throw new ModelFetchError("bad_listing", problems.join("; "));
    p.total = listingBytes(listing);
    const lock = join(this.root, LOCKS_DIR, repoFolderName(p.ref.repo));
    await withDirLock(
      lock,
      async () => {
        this.loadIndex();
        if (this.index.has(key)) {
          this.options.onEvent?.(`model ${key} was fetched by another process on this cache`);
          return;
        }
        await this.fetchLocked(key, p, listing);
      },
      { staleMs: this.options.lockStaleMs, onWait: (owner) => this.options.onEvent?.(`model ${key} is being fetched by ${owner}; waiting for it`) },
    );
  }

  private async fetchLocked(key: string, p: Pending, listing: ModelListing): Promise<void> {
    const total = listingBytes(listing);
    const blobs = new Map<string, ModelFile>();
    for (const f of listing.files) if (!blobs.has(f.etag)) blobs.set(f.etag, f);
    const counted = new Map<string, number>();
    const progress = (etag: string, bytes: number) => {
      counted.set(etag, bytes);
      let done = 0;
      for (const n of counted.values()) done += n;
      p.done = done;
    };
    for (const file of blobs.values()) await this.blob(p.ref.repo, listing.commit, file, (n) => progress(file.etag, n));
    this.link(p.ref, listing);
    const now = Date.now();
    this.dropped.delete(key);
    this.downloaded.add(key);
    this.index.set(key, {
      repo: p.ref.repo,
      revision: p.ref.revision,
      commit: listing.commit,
      bytes: total,
      files: listing.files.length,
      fetchedAt: now,
      lastUsed: now,
    });
    this.saveIndex();
    this.options.onEvent?.(
      `model ${key} (commit ${listing.commit}) is in the model cache: ${listing.files.length} files, ${progressText(total, total).split(" of ")[1]}`,
    );
    this.evict(key);
  }

  /** One blob into the cache (shared by every fetch that needs it); `progress` gets its bytes so far. */
  private blob(repo: string, commit: string, file: ModelFile, progress: (bytes: number) => void): Promise<void> {
    const paths = filePaths(repo, commit, file);
    const blob = join(this.hubDir, paths.blob);
    if (existsSync(blob) && statSync(blob).size === file.size) {
      progress(file.size);
      return Promise.resolve();
    }
    const running = this.downloads.get(paths.blob);
    if (running) return running.then(() => progress(file.size));
    const download = this.download(repo, commit, file, blob, join(this.hubDir, paths.partial), progress).finally(() => this.downloads.delete(paths.blob));
    this.downloads.set(paths.blob, download);
    return download;
  }

  private async download(repo: string, commit: string, file: ModelFile, blob: string, partial: string, progress: (bytes: number) => void): Promise<void> {
    mkdirSync(dirname(blob), { recursive: true, mode: 0o755 });
    const attempts = this.options.attempts ?? 5;
    for (let attempt = 1; ; attempt++) {
      const offset = existsSync(partial) ? Math.min(statSync(partial).size, file.size) : 0;
      progress(offset);
      try {
        await this.downloadFrom(repo, commit, file, partial, offset, progress);
        break;
      } catch (err) {
        // A broken connection: resumed from what arrived. Anything else (the hub refused, the bytes are wrong) ends it.
        if (err instanceof ModelFetchError || attempt >= attempts) {
          if (err instanceof ModelFetchError) throw err;
          throw new ModelFetchError("hub_unreachable", `the download of ${file.name} of ${repo} broke off ${attempts} times (${errorMessage(err)})`);
        }
        this.options.onEvent?.(`the download of ${file.name} of ${repo} broke off (${errorMessage(err)}); resuming`);
      }
    }
    renameSync(partial, blob);
    chmodSync(blob, 0o644);
  }

  /**
   * The file's bytes from `offset` on into the partial file (its first `offset` bytes kept), verifying the whole
   * once complete. The hash runs on the hashing thread as batches land on disk, from the file's first byte (a
   * resumed download's earlier bytes too).
   */
  private async downloadFrom(repo: string, commit: string, file: ModelFile, partial: string, offset: number, progress: (bytes: number) => void): Promise<void> {
    const check = fileCheck(file);
    let start = offset;
    const download = await this.options.hub.download(repo, commit, file.name, offset, file.size);
    // The hub ignored the Range: start over.
    if (!download.resumed) start = 0;
    const hashing = check && sharedHasher.begin(partial, check);
    let received = start;
    let tooLong = false;
    try {
      // Counted as it arrives, written in batches, hashed behind the writes (receive.ts, socket-get.ts, hash-thread.ts).
      await download.receive(
        partial,
        start,
        (chunk) => {
          received += chunk.length;
          if (received > file.size) {
            tooLong = true;
            return false;
          }
          progress(received);
          return true;
        },
        (bytes) => hashing?.written(bytes),
      );
    } catch (err) {
      hashing?.abandon();
      throw err;
    }
    if (tooLong) received = Math.max(received, file.size + 1);
    if (received !== file.size) {
      hashing?.abandon();
      if (received > file.size) {
        unlinkSync(partial);
        throw new ModelFetchError("size_mismatch", `the hub sent more than the ${file.size} bytes it listed for ${file.name} of ${repo}; nothing was kept`);
      }
      // Short: the connection ended early (resumed by the caller).
      throw new Error(`the connection ended after ${received} of ${file.size} bytes`);
    }
    const digest = await hashing?.finish(file.size);
    const expected = file.sha256 ?? (file.etag.length === 40 ? file.etag : undefined);
    if (expected !== undefined && digest !== expected) {
      unlinkSync(partial);
      throw new ModelFetchError(
        "hash_mismatch",
        `${file.name} of ${repo}@${commit} does not have the ${file.sha256 ? "sha256" : "git blob id"} the hub gave (${expected}, got ${digest}); it was refused and nothing was kept`,
      );
    }
  }

  /** The snapshot's links to its blobs, then the ref that names its commit (last: it makes the revision findable). */
  private link(ref: ModelRef, listing: ModelListing): void {
    for (const f of listing.files) {
      const paths = filePaths(ref.repo, listing.commit, f);
      const link = join(this.hubDir, paths.link);
      mkdirSync(dirname(link), { recursive: true, mode: 0o755 });
      rmSync(link, { force: true });
      symlinkSync(paths.target, link);
    }
    const refs = refPath(ref, listing.commit);
    if (refs) {
      mkdirSync(dirname(join(this.hubDir, refs)), { recursive: true, mode: 0o755 });
      writeFileSync(join(this.hubDir, refs), listing.commit, { mode: 0o644 });
    }
  }

  // ------------------------------------------------------------------------------------------- eviction

  /** Past the limit: remove the least recently used models that no worker uses and no fetch needs. */
  private evict(justFetched: string): void {
    const limit = this.options.limitBytes;
    if (limit === undefined) return;
    const keep = new Set<string>([justFetched, ...this.fetches.keys(), ...[...this.holds.values()].flat()]);
    const models: CachedModel[] = [...this.index.entries()].map(([key, e]) => ({ key, bytes: e.bytes, lastUsed: e.lastUsed }));
    const plan = planEviction(models, limit, keep);
    for (const key of plan.evict) this.remove(key);
    if (plan.evict.length > 0) this.saveIndex();
    if (plan.evict.length > 0) this.options.onEvent?.(`model cache past ${limit} bytes: evicted ${plan.evict.join(", ")} (least recently used)`);
    if (plan.overLimit) this.options.onEvent?.(`the model cache holds ${plan.bytesAfter} bytes, past its limit of ${limit}: what is left is in use`);
  }

  /** A model out of the cache: its ref, its snapshot unless another revision names the commit, blobs no snapshot links. */
  private remove(key: string): void {
    const e = this.index.get(key);
    if (!e) return;
    this.index.delete(key);
    this.dropped.add(key);
    const refs = refPath({ repo: e.repo, revision: e.revision }, e.commit);
    if (refs) rmSync(join(this.hubDir, refs), { force: true });
    const sameCommit = [...this.index.values()].some((o) => o.repo === e.repo && o.commit === e.commit);
    if (!sameCommit) rmSync(join(this.hubDir, snapshotPath(e.repo, e.commit)), { recursive: true, force: true });
    const repoDir = join(this.hubDir, repoFolderName(e.repo));
    const snapshots = join(repoDir, "snapshots");
    const linked = new Set<string>();
    for (const commit of existsSync(snapshots) ? readdirSync(snapshots) : []) collectLinks(join(snapshots, commit), linked);
    if (linked.size === 0 && ![...this.index.values()].some((o) => o.repo === e.repo)) {
      rmSync(repoDir, { recursive: true, force: true });
      return;
    }
    const blobs = join(repoDir, "blobs");
    for (const name of existsSync(blobs) ? readdirSync(blobs) : [])
      if (!name.endsWith(".incomplete") && !linked.has(name)) rmSync(join(blobs, name), { force: true });
  }

  // ------------------------------------------------------------------------------------------- the index

  /** Add what the index on disk holds and this process does not (what another process on this cache fetched). */
  private loadIndex(): void {
    const path = join(this.root, INDEX_FILE);
    if (!existsSync(path)) return;
    let saved: Record<string, IndexEntry>;
    try {
      saved = JSON.parse(readFileSync(path, "utf8")) as Record<string, IndexEntry>;
    } catch (err) {
      // Rebuilt as models are fetched again; their blobs are still there, so nothing is downloaded twice.
      this.options.onEvent?.(`the model cache's index ${path} could not be read (${errorMessage(err)}): its models are looked up again when needed`);
      return;
    }
    for (const [key, e] of Object.entries(saved))
      if (!this.index.has(key) && !this.dropped.has(key) && existsSync(join(this.hubDir, snapshotPath(e.repo, e.commit)))) this.index.set(key, e);
  }

  /**
   * Written whole and renamed into place, after taking in what another process added since this one read it: two
   * processes saving at the same instant may still drop one's newest entry, which costs that model one listing
   * request later (its blobs are there), never a download.
   */
  private saveIndex(): void {
    this.loadIndex();
    const path = join(this.root, INDEX_FILE);
    const temporary = `${path}.${process.pid}.tmp`;
    writeFileSync(temporary, JSON.stringify(Object.fromEntries(this.index)), { mode: 0o644 });
    renameSync(temporary, path);
  }
}

/** The hash a file's bytes must have: sha256 for an LFS file, else the git blob id (sha1 of "blob <size>\0" + bytes). */
function fileCheck(file: ModelFile): FileCheck | undefined {
  if (file.sha256) return { algorithm: "sha256" };
  if (file.etag.length !== 40) return undefined;
  return { algorithm: "sha1", prefix: `blob ${file.size}\0` };
}

/** The blob names the links under `dir` point at. */
function collectLinks(dir: string, into: Set<string>): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) collectLinks(path, into);
    else if (entry.isSymbolicLink()) into.add(readlinkSync(path).split("/").pop()!);
  }
}
