// The host's model cache against a fake Hugging Face hub (test/fakes/hf-hub.ts): what it writes is what
// huggingface_hub finds offline (its own lookups, in Python, with the environment svc gives workers); one fetch
// however many ask; a broken download resumes with a Range request; a wrong hash is refused and leaves nothing;
// eviction keeps the cache under its size, but not by removing a model a worker uses.

import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ModelCache } from "../../src/service/models/cache.js";
import { Hub, ModelFetchError } from "../../src/service/models/hub.js";
import { modelCacheEnv } from "../../src/drivers/env.js";
import { type FakeHub, gitBlobId, sha256, startFakeHub } from "../fakes/hf-hub.js";
import { huggingfaceHubPython, runPython } from "./python-hf.js";

const COMMIT_A = "a".repeat(40);
const COMMIT_B = "b".repeat(40);
const COMMIT_C = "c".repeat(40);

let hub: FakeHub;
let root: string;
const caches: ModelCache[] = [];
/** Files at least this large come on a socket of their own (socket-get.ts); the others through node:http. */
let socketGetBytes = Number.POSITIVE_INFINITY;

beforeEach(async () => {
  hub = await startFakeHub();
  root = mkdtempSync(join(tmpdir(), "svc-models-"));
});
afterEach(async () => {
  caches.length = 0;
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

function cache(options: Partial<ConstructorParameters<typeof ModelCache>[0]> = {}): ModelCache {
  const c = new ModelCache({ root, hub: new Hub({ url: hub.url, socketGetBytes }), retryMs: 50, ...options });
  caches.push(c);
  return c;
}

const weights = randomBytes(3 * 1024 * 1024);
const config = Buffer.from(JSON.stringify({ model_type: "gpt2", n_layer: 2 }));

function addTiny(): void {
  hub.add("acme/tiny", COMMIT_A, [
    { name: "config.json", content: config },
    { name: "model.safetensors", content: weights, lfs: true },
    { name: "tokenizer/vocab.txt", content: Buffer.from("a\nb\nc\n") },
  ]);
}

const fileGets = (name: string) => hub.requests.filter((r) => r.method === "GET" && r.path.endsWith(`/${name}`));

// Every file through node:http, then every file on a socket of its own (what files past 8 MB take).
describe.each([
  { transport: "node:http", threshold: Number.POSITIVE_INFINITY },
  { transport: "a socket of its own", threshold: 0 },
])("the model cache, files received through $transport", ({ threshold }) => {
  beforeEach(() => {
    socketGetBytes = threshold;
  });
  it("lays a model out as huggingface_hub does: blobs by etag, snapshot links, the ref of the revision", async () => {
    addTiny();
    const c = cache();
    await c.ensure("acme/tiny@main");
    const repo = join(root, "hub", "models--acme--tiny");
    expect(readFileSync(join(repo, "refs", "main"), "utf8")).toBe(COMMIT_A);
    expect(readdirSync(join(repo, "blobs")).sort()).toEqual([gitBlobId(config), sha256(weights), gitBlobId(Buffer.from("a\nb\nc\n"))].sort());
    expect(readlinkSync(join(repo, "snapshots", COMMIT_A, "model.safetensors"))).toBe(`../../blobs/${sha256(weights)}`);
    expect(readlinkSync(join(repo, "snapshots", COMMIT_A, "tokenizer", "vocab.txt"))).toBe(`../../../blobs/${gitBlobId(Buffer.from("a\nb\nc\n"))}`);
    expect(readFileSync(join(repo, "snapshots", COMMIT_A, "model.safetensors")).equals(weights)).toBe(true);
    expect(c.ready(["acme/tiny@main"])).toBe(true);
    expect(c.list()).toMatchObject([{ model: "acme/tiny@main", state: "ready", commit: COMMIT_A, bytes: weights.length + config.length + 6 }]);
  });

  it("is what huggingface_hub's own offline lookups find (snapshot_download and hf_hub_download, local_files_only)", async (ctx) => {
    const py = huggingfaceHubPython();
    if (!py.python) return ctx.skip(py.problem);
    addTiny();
    await cache().ensure("acme/tiny@main");
    // The variables a worker gets, as the drivers set them (the hub's address nowhere: it must not be asked).
    const env = { PATH: process.env.PATH ?? "/usr/bin", HOME: root, ...modelCacheEnv(root) };
    const out = runPython(
      py.python,
      [
        "import hashlib, json, os",
        "from huggingface_hub import snapshot_download, hf_hub_download",
        "folder = snapshot_download('acme/tiny', revision='main', local_files_only=True)",
        "weights = hf_hub_download('acme/tiny', 'model.safetensors', revision='main', local_files_only=True)",
        `by_commit = hf_hub_download('acme/tiny', 'config.json', revision='${COMMIT_A}', local_files_only=True)`,
        "print(json.dumps({'folder': folder, 'files': sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs),",
        "  'sha': hashlib.sha256(open(weights, 'rb').read()).hexdigest(), 'config': json.load(open(by_commit))}))",
      ].join("\n"),
      env,
    );
    const found = JSON.parse(out) as { folder: string; files: string[]; sha: string; config: unknown };
    expect(found.folder).toBe(join(root, "hub", "models--acme--tiny", "snapshots", COMMIT_A));
    expect(found.files).toEqual(["config.json", "model.safetensors", "tokenizer/vocab.txt"]);
    expect(found.sha).toBe(sha256(weights));
    expect(found.config).toEqual({ model_type: "gpt2", n_layer: 2 });
  });

  it("fetches a model once however many ask at once, and not again once it is cached", async () => {
    addTiny();
    const c = cache();
    await Promise.all([c.ensure("acme/tiny@main"), c.ensure("acme/tiny@main"), c.ensure("acme/tiny@main")]);
    await c.ensure("acme/tiny@main");
    expect(c.ready(["acme/tiny@main"])).toBe(true);
    expect(hub.requests.filter((r) => r.path.includes("/revision/"))).toHaveLength(1);
    expect(fileGets("model.safetensors")).toHaveLength(1);
    // A service started again over the same cache asks the hub nothing.
    const again = cache();
    expect(again.ready(["acme/tiny@main"])).toBe(true);
    expect(hub.requests.filter((r) => r.path.includes("/revision/"))).toHaveLength(1);
  });

  it("resumes a download that broke off with a Range request from its partial file", async () => {
    addTiny();
    hub.cutAfter("model.safetensors", 1024 * 1024);
    const c = cache();
    await c.ensure("acme/tiny@main");
    const gets = fileGets("model.safetensors");
    expect(gets[0]!.range).toBeUndefined();
    // Every later request resumes from what the partial file holds, never from 0 (on a loaded machine a resumed
    // request may break off too: it is resumed again, further on).
    const offsets = gets.slice(1).map((g) => Number(/^bytes=(\d+)-$/.exec(g.range ?? "")?.[1]));
    expect(offsets.length).toBeGreaterThanOrEqual(1);
    expect(offsets[0]).toBeGreaterThan(0);
    for (let i = 0; i < offsets.length; i++) {
      expect(offsets[i]).toBeLessThan(weights.length);
      if (i > 0) expect(offsets[i]).toBeGreaterThanOrEqual(offsets[i - 1]!);
    }
    expect(readFileSync(join(root, "hub", "models--acme--tiny", "snapshots", COMMIT_A, "model.safetensors")).equals(weights)).toBe(true);
  });

  it("refuses a file whose sha256 is not the one the hub listed, keeping nothing of it, and says so", async () => {
    addTiny();
    hub.corrupt("model.safetensors");
    const c = cache();
    const err = await c.ensure("acme/tiny@main").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelFetchError);
    expect((err as ModelFetchError).code).toBe("hash_mismatch");
    const blobs = join(root, "hub", "models--acme--tiny", "blobs");
    expect(readdirSync(blobs).filter((n) => n.startsWith(sha256(weights)))).toEqual([]);
    expect(existsSync(join(root, "hub", "models--acme--tiny", "refs", "main"))).toBe(false);
    expect(c.ready(["acme/tiny@main"])).toBe(false);
    expect(c.reason(["acme/tiny@main"])).toMatch(
      /^model acme\/tiny@main cannot be fetched from http:\/\/127\.0\.0\.1:\d+: model\.safetensors of acme\/tiny@a{40} does not have the sha256/,
    );
  });

  it("says how far a fetch is: fetching model org/name@rev: N of M MB", async () => {
    const big = randomBytes(4_000_000);
    hub.add("acme/big", COMMIT_B, [{ name: "weights.bin", content: big, lfs: true }]);
    hub.throttle(4_000_000);
    const c = cache();
    expect(c.ready(["acme/big@main"])).toBe(false);
    await new Promise((r) => setTimeout(r, 400));
    expect(c.reason(["acme/big@main"])).toMatch(/^fetching model acme\/big@main: [0-9.]+ of 4 MB$/);
    hub.throttle(undefined);
    await c.ensure("acme/big@main");
    expect(c.reason(["acme/big@main"])).toBeUndefined();
  });

  it("evicts the least recently used models past its size, never one a worker uses", async () => {
    const mb = (n: number) => randomBytes(n * 1024 * 1024);
    hub.add("acme/one", COMMIT_A, [{ name: "w.bin", content: mb(2), lfs: true }]);
    hub.add("acme/two", COMMIT_B, [{ name: "w.bin", content: mb(2), lfs: true }]);
    hub.add("acme/three", COMMIT_C, [{ name: "w.bin", content: mb(2), lfs: true }]);
    const c = cache({ limitBytes: 5 * 1024 * 1024 });
    await c.ensure("acme/one@main");
    c.hold("w1", ["acme/one@main"]);
    await new Promise((r) => setTimeout(r, 5));
    await c.ensure("acme/two@main");
    await new Promise((r) => setTimeout(r, 5));
    // Past 5 MiB: "two" is used less recently than "one"? No: "one" was used first, but a worker holds it.
    await c.ensure("acme/three@main");
    const held = c.list().map((m) => m.model);
    expect(held).toEqual(["acme/one@main", "acme/three@main"]);
    expect(c.usedBytes).toBeLessThanOrEqual(5 * 1024 * 1024);
    expect(existsSync(join(root, "hub", "models--acme--two"))).toBe(false);
    // Released, "one" is the least recently used: the next model past the size takes its place.
    c.release("w1");
    await c.ensure("acme/two@main");
    expect(c.list().map((m) => m.model)).toEqual(["acme/three@main", "acme/two@main"]);
    expect(existsSync(join(root, "hub", "models--acme--one"))).toBe(false);
  });
});
