// `svc models fetch` as a cluster node runs it (the built binary, bin/svc.js), against the stand-in hub
// (test/fakes/hf-hub.ts): two fetchers at once on one cache directory (two Pods' init containers on one node)
// list the revision once and download each file once, both exit 0 with the model in huggingface_hub's layout; a
// third run finds it there and asks the hub nothing; a model the hub lacks exits non-zero naming it.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { SVC_BIN } from "../cli-output.js";
import { type FakeHub, sha256, startFakeHub } from "../fakes/hf-hub.js";

const COMMIT = "d".repeat(40);
let hub: FakeHub;
let cache: string;

beforeEach(async () => {
  hub = await startFakeHub();
  cache = mkdtempSync(join(tmpdir(), "svc-node-models-"));
});
afterEach(async () => {
  await hub.close();
  rmSync(cache, { recursive: true, force: true });
});

function fetchModels(...models: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_BIN, "models", "fetch", "--cache", cache, "--hub", hub.url, "--json", ...models], {
      env: { ...process.env, SVC_MODEL_HUB: "", SVC_MODEL_HUB_TOKEN: "" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

it("two fetchers at once on one cache: one download per file, both done, huggingface_hub's layout", { timeout: 60_000 }, async () => {
  const weights = randomBytes(3 * 1024 * 1024);
  const config = Buffer.from('{"model_type": "gpt2"}\n');
  hub.add("acme/tiny", COMMIT, [
    { name: "model.safetensors", content: weights, lfs: true },
    { name: "config.json", content: config },
  ]);
  // Slow enough that the second fetcher starts while the first one downloads.
  hub.throttle(6 * 1024 * 1024);
  const [a, b] = await Promise.all([fetchModels("acme/tiny@main"), fetchModels("acme/tiny")]);
  expect(a.code, a.stderr).toBe(0);
  expect(b.code, b.stderr).toBe(0);
  const listings = hub.requests.filter((r) => r.path.startsWith("/api/models/"));
  const downloads = hub.requests.filter((r) => r.method === "GET" && r.path.includes("/resolve/"));
  // Each looks its revision up (before the lock: a revision the hub lacks fails at once); one downloads.
  expect(listings.length).toBeGreaterThanOrEqual(1);
  expect(listings.length).toBeLessThanOrEqual(2);
  expect(downloads.map((r) => r.path).sort()).toEqual([`/acme/tiny/resolve/${COMMIT}/config.json`, `/acme/tiny/resolve/${COMMIT}/model.safetensors`]);
  for (const run of [a, b])
    expect(JSON.parse(run.stdout)).toEqual({
      models: [{ model: "acme/tiny@main", commit: COMMIT, bytes: weights.length + config.length, state: expect.any(String) }],
    });
  expect([JSON.parse(a.stdout).models[0].state, JSON.parse(b.stdout).models[0].state].sort()).toEqual(["fetched", "ready"]);
  expect(`${a.stderr}${b.stderr}`).toMatch(/being fetched by pid \d+/);
  // What huggingface_hub reads offline: the ref, the snapshot's relative links, the blobs named by their etags.
  const repo = join(cache, "hub", "models--acme--tiny");
  expect(readFileSync(join(repo, "refs", "main"), "utf8")).toBe(COMMIT);
  expect(readlinkSync(join(repo, "snapshots", COMMIT, "model.safetensors"))).toBe(`../../blobs/${sha256(weights)}`);
  expect(readFileSync(join(repo, "snapshots", COMMIT, "config.json"))).toEqual(config);
  expect(existsSync(join(cache, "svc-locks", "models--acme--tiny"))).toBe(false);

  // Already there: no request to the hub.
  const before = hub.requests.length;
  const again = await fetchModels("acme/tiny@main");
  expect(again.code, again.stderr).toBe(0);
  expect(JSON.parse(again.stdout).models[0].state).toBe("ready");
  expect(hub.requests.length).toBe(before);
});

it("a model the hub lacks: a non-zero exit naming it and its error code", { timeout: 30_000 }, async () => {
  hub.add("acme/tiny", COMMIT, [{ name: "config.json", content: Buffer.from("{}") }]);
  const run = await fetchModels("acme/tiny@main", "acme/missing@main");
  expect(run.code).not.toBe(0);
  expect(run.stderr).toMatch(/acme\/missing@main.*not_found/);
  expect(run.stdout).toBe("");
  // The one the hub has is in the cache all the same.
  expect(existsSync(join(cache, "hub", "models--acme--tiny", "snapshots", COMMIT, "config.json"))).toBe(true);
});
