// Dependencies of an endpoint: parsing npm specs, finding packages the bundler must not inline (native
// addons), and installing an endpoint's dependencies for Linux x86_64 with npm.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { UserError } from "../errors.js";

/** "sharp@^0.34" -> "sharp"; "@node-rs/xxhash@1" -> "@node-rs/xxhash"; "lodash" -> "lodash". */
export function packageNameOf(spec: string): string {
  const at = spec.indexOf("@", spec.startsWith("@") ? 1 : 0);
  return at === -1 ? spec : spec.slice(0, at);
}

/** The range part of a spec ("*" when none is given). */
export function packageRangeOf(spec: string): string {
  const name = packageNameOf(spec);
  const range = spec.slice(name.length + 1);
  return range.length > 0 ? range : "*";
}

/** The package a bare import names: "lodash/fp" -> "lodash", "@a/b/c" -> "@a/b". Undefined for relative, absolute and builtin paths. */
export function importedPackageName(specifier: string): string | undefined {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:") || /^[a-z]+:/i.test(specifier)) {
    return undefined;
  }
  const parts = specifier.split("/");
  if (specifier.startsWith("@")) return parts.length >= 2 ? `${parts[0]}/${parts[1]}` : undefined;
  return parts[0];
}

/** Generated package.json of an endpoint's install directory (stable key order). */
export function endpointPackageJson(endpoint: string, specs: readonly string[]): string {
  const dependencies: Record<string, string> = {};
  for (const spec of [...specs].sort((a, b) => packageNameOf(a).localeCompare(packageNameOf(b)))) {
    dependencies[packageNameOf(spec)] = packageRangeOf(spec);
  }
  return `${JSON.stringify({ name: `svc-endpoint-${endpoint}`, version: "0.0.0", private: true, dependencies }, null, 2)}\n`;
}

// Loaders that locate or build a native addon: a package depending on one of them ships native code.
const NATIVE_LOADERS = ["node-gyp-build", "prebuild-install", "bindings", "node-pre-gyp", "@mapbox/node-pre-gyp", "cmake-js", "node-addon-api", "nan"];
// napi-rs style packages publish one optional package per platform: "<name>-linux-x64-gnu", "@scope/<name>-darwin-arm64"...
const PLATFORM_PACKAGE = /-(linux|darwin|win32|freebsd|android)-(x64|arm64|arm|ia32|riscv64|s390x|ppc64|universal)(-[a-z]+)?$/;

interface PackageJson {
  name?: string;
  version?: string;
  gypfile?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

function readPackageJson(dir: string): PackageJson | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
  } catch {
    return undefined;
  }
}

/** Whether a directory tree (not descending into nested node_modules) holds a `.node` or `.wasm` binary. Bounded walk. */
function containsNodeBinary(dir: string, budget = { entries: 5000 }): boolean {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return false;
  }
  for (const name of names) {
    if (--budget.entries < 0) return false;
    if (name.endsWith(".node") || name.endsWith(".wasm")) return true;
    if (name === "node_modules" || name.startsWith(".")) continue;
    const full = join(dir, name);
    let isDir = false;
    try {
      isDir = statSync(full).isDirectory();
    } catch {
      continue;
    }
    if (isDir && containsNodeBinary(full, budget)) return true;
  }
  return false;
}

/** Why a package at `dir` cannot be bundled (native code), or undefined when it can. */
export function nativeReason(dir: string): string | undefined {
  const pkg = readPackageJson(dir);
  if (!pkg) return undefined;
  if (pkg.gypfile || existsSync(join(dir, "binding.gyp"))) return "builds a native addon (binding.gyp)";
  const deps = { ...pkg.dependencies, ...pkg.optionalDependencies };
  const loader = NATIVE_LOADERS.find((name) => name in deps);
  if (loader) return `loads a native addon (depends on ${loader})`;
  const platformPackage = Object.keys(pkg.optionalDependencies ?? {}).find((name) => PLATFORM_PACKAGE.test(name));
  if (platformPackage) return `ships per-platform binaries (${platformPackage})`;
  if (containsNodeBinary(dir)) return "contains .node/.wasm binaries";
  return undefined;
}

/** Node's lookup of a package directory from `fromDir`: the nearest node_modules/<name> going up. */
export function findPackageDir(name: string, fromDir: string): string | undefined {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** The directory of the package containing `file` (nearest ancestor with a package.json under node_modules). */
export function owningPackage(file: string): { dir: string; name: string } | undefined {
  const marker = "/node_modules/";
  const index = file.lastIndexOf(marker);
  if (index === -1) return undefined;
  const rest = file.slice(index + marker.length).split("/");
  const name = rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  return { dir: file.slice(0, index + marker.length) + name, name };
}

export function installedVersion(dir: string): string | undefined {
  return readPackageJson(dir)?.version;
}

/** Install scripts (native builds) only make sense when the host is what the workers run: linux x64 glibc. */
export function hostIsLinuxX64Glibc(): boolean {
  if (process.platform !== "linux" || process.arch !== "x64") return false;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return Boolean(header?.glibcVersionRuntime);
}

export interface NpmInstallPlan {
  dir: string;
  packageJson: string;
  args: string[];
}

/** The npm invocation that installs `specs` into `dir` for Linux x86_64 (pure). */
export function planNpmInstall(dir: string, endpoint: string, specs: readonly string[], runScripts: boolean): NpmInstallPlan {
  const args = ["install", "--os=linux", "--cpu=x64", "--libc=glibc", "--omit=dev", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"];
  if (!runScripts) args.push("--ignore-scripts");
  return { dir, packageJson: endpointPackageJson(endpoint, specs), args };
}

/** How long an npm install may run before it is given up: SVC_NPM_INSTALL_TIMEOUT_MS, else 10 minutes. Pure. */
export function npmInstallTimeoutMs(env: NodeJS.ProcessEnv): number {
  const set = Number(env.SVC_NPM_INSTALL_TIMEOUT_MS);
  return Number.isFinite(set) && set > 0 ? set : 10 * 60_000;
}

export interface NpmInstallOptions {
  /** Default npmInstallTimeoutMs(process.env). */
  timeoutMs?: number;
  /** The npm to run (default `npm` on PATH; execa finds npm.cmd on Windows). */
  npm?: string;
}

/** Run an install plan. Leaves no lock files or `.bin` links behind, so the artifact stays deterministic. */
export async function runNpmInstall(plan: NpmInstallPlan, endpoint: string, options: NpmInstallOptions = {}): Promise<void> {
  await mkdir(plan.dir, { recursive: true });
  await writeFile(join(plan.dir, "package.json"), plan.packageJson);
  const timeoutMs = options.timeoutMs ?? npmInstallTimeoutMs(process.env);
  // Loaded here: every `svc` command builds the command tree that imports this module (docs/design/0019).
  const { execa } = await import("execa");
  const result = await execa(options.npm ?? "npm", plan.args, {
    cwd: plan.dir,
    stdin: "ignore",
    all: true,
    reject: false,
    timeout: timeoutMs,
    env: { npm_config_update_notifier: "false" },
  });
  const lastLines = () => (result.all ?? "").trim().split("\n").filter(Boolean).slice(-12);
  if (result.timedOut) {
    throw new UserError(
      `npm did not finish installing the dependencies of endpoint "${endpoint}" within ${timeoutMs < 1000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`}; it was stopped`,
      {
        problems: lastLines(),
        hint: "Check that the npm registry is reachable from here (`npm ping`; behind a proxy set HTTPS_PROXY), then build again. A native build that needs longer: set SVC_NPM_INSTALL_TIMEOUT_MS (milliseconds).",
      },
    );
  }
  if (result.exitCode === undefined) {
    throw new UserError(`Could not run npm to install the dependencies of endpoint "${endpoint}"`, {
      hint: "Install npm (it comes with Node.js) and make sure it is on PATH.",
      cause: result,
    });
  }
  if (result.exitCode !== 0) {
    throw new UserError(`npm could not install the dependencies of endpoint "${endpoint}"`, {
      problems: lastLines(),
      hint: "Check the package names and versions in the endpoint's `dependencies`, and that the npm registry is reachable.",
    });
  }
  await rm(join(plan.dir, "package-lock.json"), { force: true });
  await rm(join(plan.dir, "node_modules", ".package-lock.json"), { force: true });
  await removeBinDirs(join(plan.dir, "node_modules"));
}

// `.bin` holds symlinks to package CLIs: workers never run them, and the artifact carries no links.
async function removeBinDirs(nodeModules: string): Promise<void> {
  if (!existsSync(nodeModules)) return;
  await rm(join(nodeModules, ".bin"), { recursive: true, force: true });
  for (const name of readdirSync(nodeModules)) {
    const full = join(nodeModules, name);
    if (name.startsWith("@")) {
      for (const inner of readdirSync(full)) await removeBinDirs(join(full, inner, "node_modules"));
    } else if (!name.startsWith(".")) {
      await removeBinDirs(join(full, "node_modules"));
    }
  }
}
