import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  endpointPackageJson,
  findPackageDir,
  importedPackageName,
  nativeReason,
  owningPackage,
  packageNameOf,
  packageRangeOf,
  npmInstallTimeoutMs,
  planNpmInstall,
  runNpmInstall,
} from "./dependencies.js";
import { UserError } from "../errors.js";

const root = mkdtempSync(join(tmpdir(), "svc-deps-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function pkg(name: string, json: object, files: Record<string, string> = {}): string {
  const dir = join(root, "node_modules", name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, version: "1.2.3", ...json }));
  for (const [file, contents] of Object.entries(files)) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    writeFileSync(join(dir, file), contents);
  }
  return dir;
}

describe("dependency specs", () => {
  it("parses names and ranges", () => {
    expect(packageNameOf("sharp@^0.34")).toBe("sharp");
    expect(packageNameOf("@node-rs/xxhash@1")).toBe("@node-rs/xxhash");
    expect(packageNameOf("@node-rs/xxhash")).toBe("@node-rs/xxhash");
    expect(packageNameOf("lodash")).toBe("lodash");
    expect(packageRangeOf("lodash")).toBe("*");
    expect(packageRangeOf("@a/b@~2.1")).toBe("~2.1");
  });

  it("names the package of a bare import", () => {
    expect(importedPackageName("lodash/fp")).toBe("lodash");
    expect(importedPackageName("@a/b/c")).toBe("@a/b");
    expect(importedPackageName("./x")).toBeUndefined();
    expect(importedPackageName("node:fs")).toBeUndefined();
  });

  it("writes a stable package.json for an endpoint's install", () => {
    expect(JSON.parse(endpointPackageJson("gpu", ["zod@3", "@a/b@1", "left-pad"]))).toEqual({
      name: "svc-endpoint-gpu",
      version: "0.0.0",
      private: true,
      dependencies: { "@a/b": "1", "left-pad": "*", zod: "3" },
    });
  });

  it("installs for linux x64 glibc, and skips scripts unless asked", () => {
    const plan = planNpmInstall("/x", "gpu", ["a@1"], false);
    expect(plan.args).toEqual(expect.arrayContaining(["install", "--os=linux", "--cpu=x64", "--libc=glibc", "--omit=dev", "--ignore-scripts"]));
    expect(planNpmInstall("/x", "gpu", ["a@1"], true).args).not.toContain("--ignore-scripts");
  });
});

describe("native package detection", () => {
  it("recognizes every kind of native package and leaves plain ones alone", () => {
    expect(nativeReason(pkg("plain", { main: "index.js" }, { "index.js": "" }))).toBeUndefined();
    expect(nativeReason(pkg("gyp", {}, { "binding.gyp": "{}" }))).toMatch(/binding.gyp/);
    expect(nativeReason(pkg("gypflag", { gypfile: true }))).toMatch(/binding.gyp/);
    expect(nativeReason(pkg("loader", { dependencies: { "node-gyp-build": "^4" } }))).toMatch(/node-gyp-build/);
    expect(nativeReason(pkg("prebuilt", { dependencies: { "prebuild-install": "^7" } }))).toMatch(/prebuild-install/);
    expect(nativeReason(pkg("@scope/napi", { optionalDependencies: { "@scope/napi-linux-x64-gnu": "1", "@scope/napi-darwin-arm64": "1" } }))).toMatch(
      /per-platform/,
    );
    expect(nativeReason(pkg("binary", {}, { "prebuilds/linux-x64/x.node": "" }))).toMatch(/\.node/);
    expect(nativeReason(pkg("wasm", {}, { "dist/x.wasm": "" }))).toMatch(/wasm/);
  });

  it("finds packages the way Node does and names the package owning a file", () => {
    mkdirSync(join(root, "src", "deep"), { recursive: true });
    expect(findPackageDir("plain", join(root, "src", "deep"))).toBe(join(root, "node_modules", "plain"));
    expect(findPackageDir("missing-package", join(root, "src"))).toBeUndefined();
    expect(owningPackage("/p/node_modules/a/node_modules/@s/b/lib/x.node")).toEqual({ dir: "/p/node_modules/a/node_modules/@s/b", name: "@s/b" });
    expect(owningPackage("/p/src/x.node")).toBeUndefined();
  });
});

describe("runNpmInstall", () => {
  /** A stand-in for npm: a shell script doing `body`. */
  function fakeNpm(name: string, body: string): string {
    const file = join(root, `${name}.sh`);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  }
  const plan = (name: string) => planNpmInstall(join(root, "install", name), "worker", ["left-pad@1.3.0"], false);

  it("stops an install that runs past its time, and says what to do", async () => {
    const npm = fakeNpm("hangs", "echo fetching left-pad; exec sleep 30");
    const started = Date.now();
    const err = await runNpmInstall(plan("hangs"), "worker", { npm, timeoutMs: 300 }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(err).toBeInstanceOf(UserError);
    expect((err as UserError).message).toBe('npm did not finish installing the dependencies of endpoint "worker" within 300 ms; it was stopped');
    expect((err as UserError).hint).toMatch(/registry is reachable .*SVC_NPM_INSTALL_TIMEOUT_MS/);
    expect((err as UserError).problems).toEqual(["fetching left-pad"]);
  });

  it("reports a failed install with npm's last lines", async () => {
    const npm = fakeNpm("fails", "echo 'npm error 404 Not Found - GET https://registry.npmjs.org/nosuch' >&2; exit 1");
    const err = (await runNpmInstall(plan("fails"), "worker", { npm }).catch((e: unknown) => e)) as UserError;
    expect(err.message).toBe('npm could not install the dependencies of endpoint "worker"');
    expect(err.problems).toEqual(["npm error 404 Not Found - GET https://registry.npmjs.org/nosuch"]);
  });

  it("says when npm cannot be run at all", async () => {
    const err = (await runNpmInstall(plan("missing"), "worker", { npm: join(root, "no-such-npm") }).catch((e: unknown) => e)) as UserError;
    expect(err.message).toBe('Could not run npm to install the dependencies of endpoint "worker"');
    expect(err.hint).toMatch(/on PATH/);
  });

  it("runs npm in the plan's directory with the plan's arguments, and leaves no lock file", async () => {
    const npm = fakeNpm("works", 'echo "$@" > args.txt; echo {} > package-lock.json');
    await runNpmInstall(plan("works"), "worker", { npm });
    expect(existsSync(join(root, "install", "works", "package-lock.json"))).toBe(false);
    expect(readFileSync(join(root, "install", "works", "args.txt"), "utf8")).toMatch(/^install --os=linux .*--ignore-scripts\n$/);
  });

  it("allows 10 minutes unless SVC_NPM_INSTALL_TIMEOUT_MS says otherwise", () => {
    expect(npmInstallTimeoutMs({})).toBe(600_000);
    expect(npmInstallTimeoutMs({ SVC_NPM_INSTALL_TIMEOUT_MS: "1200000" })).toBe(1_200_000);
    expect(npmInstallTimeoutMs({ SVC_NPM_INSTALL_TIMEOUT_MS: "soon" })).toBe(600_000);
  });
});
