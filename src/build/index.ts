// `buildProject`: sources -> discovery -> generated handlers -> esbuild bundles -> Linux x86_64 dependencies
// -> manifest -> deterministic .svc/artifact.tar.gz. Each step is planned by a pure function (handlers.ts,
// exclusions.ts, manifest.ts, dependencies.ts) and applied here.

import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import { memoryEntries, mergeEntries, packEntries, planEntries, type PackEntry } from "../artifact/pack.js";
import { InternalError, UserError } from "../errors.js";
import { MANIFEST_FILE, type Manifest } from "svc/internal";
import { bundleEndpoints, svcSdkEntry, type BundleResult } from "./bundle.js";
import { hostIsLinuxX64Glibc, packageNameOf, planNpmInstall, runNpmInstall } from "./dependencies.js";
import { discover } from "./discover.js";
import type { DiscoveryResult } from "./discover-records.js";
import { parseExcludeList, planExclusions } from "./exclusions.js";
import { fingerprintProject } from "./fingerprint.js";
import { generateHandlerSource, HANDLERS_DIR } from "./handlers.js";
import { appNameOf, buildManifest, handlerPath, serializeManifest } from "./manifest.js";

/** The spec's artifact limit: 1.5 GB (decimal). SVC_MAX_ARTIFACT_BYTES overrides it. */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;

export const SVC_DIR = ".svc";
export const BUILD_DIR = ".svc/.build";
export const STAGING_DIR = ".svc/.build/artifact";
export const ARTIFACT_FILE = ".svc/artifact.tar.gz";

export interface BuildOptions {
  /** More packages to leave out of the artifact (names; "a,b" lists are split). */
  exclude?: string[];
  /** Keep `.svc/.build/` (generated handlers and the staging tree) for inspection. */
  keepBuild?: boolean;
  /** Called as each step starts. */
  onProgress?: (step: string) => void;
}

export interface BuiltEndpoint {
  name: string;
  type: "queue" | "lb";
  /** An image endpoint's image (`Endpoint({ name, image })`): its container runs the jobs, no code is bundled. */
  image?: string;
  /** Function names. */
  functions: string[];
  /** "METHOD /path" of a load-balanced endpoint. */
  routes: string[];
  /** Package specs installed beside this endpoint's handler. */
  dependencies: string[];
}

export interface BuildResult {
  manifest: Manifest;
  manifestPath: string;
  artifactPath: string;
  artifactBytes: number;
  endpoints: BuiltEndpoint[];
  /** Every installed package spec, over all endpoints, sorted. */
  dependencies: string[];
  /** Packages left out of the artifact. */
  excluded: string[];
  warnings: string[];
  durationMs: number;
}

export function maxArtifactBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SVC_MAX_ARTIFACT_BYTES;
  if (raw === undefined || raw === "") return MAX_ARTIFACT_BYTES;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) {
    throw new UserError(`SVC_MAX_ARTIFACT_BYTES must be a positive integer (bytes), not "${raw}"`);
  }
  return value;
}

/** The JSON-friendly summary `svc build --json` prints. */
export function summarizeBuild(result: BuildResult) {
  return {
    app: result.manifest.app,
    fingerprint: result.manifest.fingerprint,
    artifactPath: result.artifactPath,
    artifactBytes: result.artifactBytes,
    manifestPath: result.manifestPath,
    endpoints: result.endpoints,
    dependencies: result.dependencies,
    excluded: result.excluded,
    warnings: result.warnings,
    durationMs: result.durationMs,
  };
}

/** Add detected native packages (as name@installed-version) to declared specs; a declared name wins. */
export function mergeDependencies(declared: readonly string[], natives: BundleResult["natives"], excluded: ReadonlySet<string>): string[] {
  const byName = new Map(declared.map((spec) => [packageNameOf(spec), spec]));
  for (const native of natives) {
    if (excluded.has(native.name) || byName.has(native.name)) continue;
    byName.set(native.name, native.version ? `${native.name}@${native.version}` : native.name);
  }
  return [...byName.keys()].sort().map((name) => byName.get(name)!);
}

export async function buildProject(rootDir: string, options: BuildOptions = {}): Promise<BuildResult> {
  const started = performance.now();
  const root = resolve(rootDir);
  const progress = options.onProgress ?? (() => {});
  if (!existsSync(root)) throw new UserError(`Project directory ${rootDir} does not exist`);
  if (!existsSync(svcSdkEntry(root))) {
    throw new InternalError(`svc's SDK build is missing (${svcSdkEntry(root)}); run \`npm run build\` in the svc-cli repository`);
  }

  progress("Discovering endpoints");
  const discovery: DiscoveryResult = await discover(root);
  if (discovery.endpoints.length === 0) {
    throw new UserError("No endpoint functions found", {
      problems: discovery.warnings,
      hint:
        `Searched ${discovery.files.length} source file(s) under ${root}. Check the Endpoint(...) syntax ` +
        '(e.g. `export const f = Endpoint({ name: "x" })(async function f(input) {...})`) and the ignore patterns.',
    });
  }
  const warnings = [...discovery.warnings];
  const userExcludes = parseExcludeList(options.exclude);
  const excludedNames = new Set(planExclusions({}, userExcludes).excluded);

  const buildDir = join(root, BUILD_DIR);
  const staging = join(root, STAGING_DIR);
  const artifactPath = join(root, ARTIFACT_FILE);
  const manifestPath = join(root, SVC_DIR, MANIFEST_FILE);
  await rm(buildDir, { recursive: true, force: true });
  // A failed build must not leave the previous artifact looking current.
  await rm(artifactPath, { force: true });
  await rm(manifestPath, { force: true });
  try {
    progress("Generating handlers");
    const endpoints = [...discovery.endpoints].sort((a, b) => (a.name < b.name ? -1 : 1));
    // An image endpoint's container brings its own code: nothing is generated, bundled or installed for it.
    const coded = endpoints.filter((e) => e.config.image === undefined);
    const entryOf = (name: string) => join(root, HANDLERS_DIR, `${name}.ts`);
    const entrySources = new Map(coded.map((e) => [e.name, generateHandlerSource(e)]));
    // Entries and bundles live in memory; .svc/.build/ only gets them with --keep-build (and npm installs).
    // The directory must exist all the same: esbuild resolves the entries' relative imports from it.
    await mkdir(join(root, HANDLERS_DIR), { recursive: true });
    if (options.keepBuild) {
      await Promise.all(coded.map((e) => writeFile(entryOf(e.name), entrySources.get(e.name)!)));
    }

    progress(`Bundling ${coded.length} endpoint(s)`);
    const bundles = await bundleEndpoints(
      root,
      coded.map((endpoint) => ({
        endpoint: endpoint.name,
        entry: entryOf(endpoint.name),
        source: entrySources.get(endpoint.name)!,
        outfile: join(staging, handlerPath(endpoint.name)),
        external: [...endpoint.config.dependencies.map(packageNameOf), ...excludedNames],
        definedIn: [...new Set([endpoint.definedAt.file, ...endpoint.functions.map((f) => f.loc.file), ...endpoint.routes.map((r) => r.loc.file)])],
      })),
      { write: false },
    );
    const inMemory = new Map<string, Uint8Array>();
    for (const file of bundles.flatMap((b) => b.files)) inMemory.set(relative(staging, file.path).split(sep).join("/"), file.contents);
    const imported = new Set(bundles.flatMap((b) => b.importedPackages));
    for (const bundle of bundles) {
      warnings.push(...bundle.warnings);
      for (const native of bundle.natives) {
        if (excludedNames.has(native.name)) {
          warnings.push(`endpoint "${bundle.endpoint}": native package "${native.name}" is excluded; the worker image must provide it`);
        }
      }
    }

    const exclusions = planExclusions(Object.fromEntries(coded.map((e) => [e.name, e.config.dependencies])), userExcludes, imported);
    warnings.push(...exclusions.warnings);
    const dependencies: Record<string, string[]> = Object.fromEntries(endpoints.map((e) => [e.name, []]));
    for (const bundle of bundles) {
      dependencies[bundle.endpoint] = mergeDependencies(exclusions.install[bundle.endpoint] ?? [], bundle.natives, excludedNames);
    }

    const toInstall = endpoints.filter((e) => dependencies[e.name]!.length > 0);
    const runScripts = toInstall.length > 0 && hostIsLinuxX64Glibc();
    if (toInstall.length > 0 && !runScripts) {
      warnings.push("install scripts were skipped (--ignore-scripts): this machine is not linux-x64-glibc; packages that compile at install time may not work");
    }
    for (const endpoint of toInstall) {
      progress(`Installing ${dependencies[endpoint.name]!.join(", ")} for "${endpoint.name}" (linux-x64)`);
      const dir = join(staging, "endpoints", endpoint.name);
      await runNpmInstall(planNpmInstall(dir, endpoint.name, dependencies[endpoint.name]!, runScripts), endpoint.name);
    }

    progress("Writing the manifest");
    const codeHashes: Record<string, string> = {};
    for (const bundle of bundles) {
      const hash = createHash("sha256");
      for (const file of [...bundle.files].sort((a, b) => (a.path < b.path ? -1 : 1))) hash.update(relative(staging, file.path)).update(file.contents);
      codeHashes[bundle.endpoint] = hash.digest("hex");
    }
    const manifest = buildManifest({
      app: appNameOf(root),
      fingerprint: await fingerprintProject(root, discovery.files),
      endpoints,
      dependencies,
      excluded: exclusions.excluded,
      codeHashes,
    });
    const manifestText = serializeManifest(manifest);
    inMemory.set(MANIFEST_FILE, Buffer.from(manifestText));
    if (options.keepBuild) {
      for (const [name, data] of inMemory) {
        await mkdir(dirname(join(staging, name)), { recursive: true });
        await writeFile(join(staging, name), data);
      }
    }

    progress("Packing the artifact");
    const partial = `${artifactPath}.partial`;
    // Installed dependencies are on disk; bundles and the manifest come from memory.
    const onDisk = existsSync(staging) ? await planEntries(staging) : [];
    const entries = mergeEntries(onDisk, memoryEntries(inMemory));
    const bytes = await packEntries(entries, partial);
    const limit = maxArtifactBytes();
    if (bytes > limit) {
      await rm(partial, { force: true });
      throw new UserError(`The artifact is ${formatBytes(bytes)}, over the ${formatBytes(limit)} limit`, {
        problems: largestItems(entries, 5).map((item) => `${item.label}: ${formatBytes(item.bytes)}`),
        hint: "Drop or replace the largest dependencies above, or leave out packages your workers provide themselves with `svc build --exclude <pkg1,pkg2>`.",
      });
    }
    await rename(partial, artifactPath);
    // Written last, so the manifest beside the artifact always describes it.
    await writeFile(manifestPath, manifestText);

    const installed = new Set(Object.values(dependencies).flat());
    return {
      manifest,
      manifestPath,
      artifactPath,
      artifactBytes: bytes,
      endpoints: endpoints.map((e) => ({
        name: e.name,
        type: e.type,
        ...(e.config.image !== undefined ? { image: e.config.image } : {}),
        functions: e.functions.map((f) => f.name),
        routes: e.routes.map((r) => `${r.method} ${r.path}`),
        dependencies: dependencies[e.name]!,
      })),
      dependencies: [...installed].sort(),
      excluded: exclusions.excluded,
      warnings,
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    if (!options.keepBuild && existsSync(buildDir)) await rm(buildDir, { recursive: true, force: true });
  }
}

export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = -1;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** The biggest packages and bundles among the artifact's entries, to say what to exclude. */
export function largestItems(entries: readonly PackEntry[], count: number): Array<{ label: string; bytes: number }> {
  const sizes = new Map<string, number>();
  for (const entry of entries) {
    if (entry.type !== "file") continue;
    const parts = entry.name.split("/");
    let label: string | undefined;
    if (parts[0] === "endpoints" && parts[2] === "node_modules" && parts.length > 4) {
      const pkg = parts[3]!.startsWith("@") ? `${parts[3]}/${parts[4]}` : parts[3]!;
      label = `${pkg} (endpoint "${parts[1]}")`;
    } else if (parts[0] === "endpoints" && parts[2] === "handler.mjs") {
      label = `endpoints/${parts[1]}/handler.mjs (bundled code)`;
    }
    if (label) sizes.set(label, (sizes.get(label) ?? 0) + entry.size);
  }
  return [...sizes]
    .map(([label, bytes]) => ({ label, bytes }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, count);
}
