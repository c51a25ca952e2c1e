// Native packages end up installed for linux-x64 in the artifact (real npm, real registry) and work from the
// extracted artifact in a plain node process.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanupTemps, copyFixture, extract, requireCompiled, runNode, svc, tarListing } from "./harness.js";

beforeAll(requireCompiled);
afterAll(cleanupTemps);

const CALL = (endpoint: string, fn: string, input: unknown) => `
  const h = (await import("./endpoints/${endpoint}/handler.mjs")).default;
  await h.init();
  console.log(JSON.stringify(await h.invoke(${JSON.stringify(fn)}, ${JSON.stringify(input)}, { jobId: "j", signal: new AbortController().signal }).value));`;

describe("a declared napi-rs dependency (@node-rs/xxhash@1)", () => {
  it("installs the linux-x64-gnu binary only, and the handler hashes from the extracted artifact", async () => {
    const project = copyFixture("build-native");
    const result = await svc(["build", "-C", project]);
    expect(result.stderr).not.toContain("error");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("dependencies: @node-rs/xxhash@1");

    const artifact = join(project, ".svc/artifact.tar.gz");
    const listing = tarListing(artifact);
    expect(listing).toContain("endpoints/hasher/node_modules/@node-rs/xxhash-linux-x64-gnu/xxhash.linux-x64-gnu.node");
    expect(listing.filter((f) => /musl|darwin|win32|arm64/.test(f))).toEqual([]);
    // Deterministic output: no lock files, no .bin links.
    expect(listing.filter((f) => /package-lock\.json|\.bin\//.test(f))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(project, ".svc/svc_manifest.json"), "utf8"));
    expect(manifest.resources.hasher.dependencies).toEqual(["@node-rs/xxhash@1"]);

    const root = extract(artifact);
    const answer = JSON.parse(runNode(root, CALL("hasher", "hash", { text: "hello" })).trim());
    // xxh32("hello", seed 0), computed by the native addon.
    expect(answer).toEqual({ xxh32: 4211111929 });
  });
});

describe("--exclude on a declared dependency", () => {
  it("warns, installs nothing and keeps the import external", async () => {
    const project = copyFixture("build-native");
    const result = await svc(["build", "--json", "--exclude", "@node-rs/xxhash", "-C", project]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('warning: endpoint "hasher": dependency "@node-rs/xxhash@1" is not installed: it is excluded with --exclude');
    expect(result.stderr).not.toContain("Installing");
    const summary = JSON.parse(result.stdout);
    expect(summary.dependencies).toEqual([]);
    expect(summary.excluded).toContain("@node-rs/xxhash");
    const listing = tarListing(join(project, ".svc/artifact.tar.gz"));
    expect(listing.filter((f) => f.includes("node_modules"))).toEqual([]);
    const root = extract(join(project, ".svc/artifact.tar.gz"));
    expect(readFileSync(join(root, "endpoints/hasher/handler.mjs"), "utf8")).toContain('from "@node-rs/xxhash"');
  });
});

describe("an undeclared native package the code imports (bufferutil)", () => {
  it("is detected, kept external, installed as name@installed-version with its linux-x64 prebuild", async () => {
    const project = copyFixture("build-native-detect");
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: project, stdio: "ignore" });
    const installed = JSON.parse(readFileSync(join(project, "node_modules/bufferutil/package.json"), "utf8")).version as string;

    const result = await svc(["build", "--json", "-C", project]);
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout);
    expect(summary.dependencies).toEqual([`bufferutil@${installed}`]);
    expect(summary.endpoints[0].dependencies).toEqual([`bufferutil@${installed}`]);

    const artifact = join(project, ".svc/artifact.tar.gz");
    const listing = tarListing(artifact);
    expect(listing.some((f) => /^endpoints\/masker\/node_modules\/bufferutil\/prebuilds\/linux-x64\/.+\.node$/.test(f))).toBe(true);
    const root = extract(artifact);
    const bundle = readFileSync(join(root, "endpoints/masker/handler.mjs"), "utf8");
    expect(bundle).toMatch(/from "bufferutil"/);
    const script = `${CALL("masker", "mask", { text: "abcd" })}
      // bufferutil falls back to plain JS when its addon fails to load: prove the addon is what ran.
      console.log(JSON.stringify(process.report.getReport().sharedObjects.filter((f) => f.endsWith(".node"))));`;
    const [answer, loaded] = runNode(root, script)
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    // "abcd" (61 62 63 64) XOR 01 02 03 04
    expect(answer).toEqual({ masked: "60606060" });
    expect(loaded).toEqual([expect.stringMatching(/endpoints\/masker\/node_modules\/bufferutil\/prebuilds\/linux-x64\/.+\.node$/)]);
  });
});
