// The inputs of an image, read from this host (the first of the three steps in images.ts): the Node binary and
// the shared libraries it links (ldd), the dist/ files the worker runtime reaches and the production packages it
// imports, and for the server image svc's whole dist/, bin/, templates/ and production packages.

import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, realpathSync } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import * as esbuild from "esbuild";
import type FastGlob from "fast-glob";
import { errorMessage, UserError } from "../errors.js";
import { SVC_PACKAGE_ROOT } from "../version.js";
import { CA_BUNDLE, NODE_IN_IMAGE, RUNTIME_ROOT } from "./image-names.js";

/** fast-glob, loaded on first use: `svc images`' module is part of every command's tree (docs/design/0019). */
const fg = async (patterns: string | string[], options: FastGlob.Options): Promise<string[]> => (await import("fast-glob")).default(patterns, options);

/** A file of the image: `path` inside the image (absolute), with its content in memory or on the host. */
export interface ImageFile {
  path: string;
  mode: number;
  size: number;
  sha256: string;
  /** Host path streamed into the tar (large system files). */
  source?: string;
  /** Content in memory (runtime files: hashed and packed from the same bytes, even if dist/ is rebuilt meanwhile). */
  content?: Buffer;
}

export interface ImageInputs {
  /** Host files: node, its libraries, CA certificates. */
  system: ImageFile[];
  /** The runtime under RUNTIME_ROOT: dist files and packages. */
  runtime: ImageFile[];
  hasCaBundle: boolean;
}

export interface CollectOptions {
  /** Node binary to ship (default: the one running svc). */
  nodePath?: string;
  /** svc package root holding dist/ (default: this package). */
  packageRoot?: string;
}

/** `ldd` output -> the library paths to copy (the loader included; the vDSO skipped). Pure. */
export function parseLdd(output: string): string[] {
  const paths: string[] = [];
  const missing: string[] = [];
  for (const raw of output.split("\n")) {
    const line = raw.trim();
    if (!line || /statically linked|not a dynamic executable/.test(line)) continue;
    const notFound = /^(\S+)\s+=>\s+not found$/.exec(line);
    if (notFound) {
      missing.push(notFound[1]!);
      continue;
    }
    const arrow = /^(\S+)\s+=>\s+(\S+)(?:\s+\(0x[0-9a-f]+\))?$/.exec(line);
    if (arrow) {
      if (isAbsolute(arrow[2]!)) paths.push(arrow[2]!);
      continue;
    }
    const direct = /^(\/\S+)\s+\(0x[0-9a-f]+\)$/.exec(line);
    if (direct) paths.push(direct[1]!);
  }
  if (missing.length > 0) {
    throw new UserError(`Cannot build the worker image: Node's shared libraries are missing on this machine`, {
      problems: missing.map((m) => `${m} => not found`),
    });
  }
  return [...new Set(paths)];
}

const hashCache = new Map<string, string>();

/** sha256 of a large host file, remembered by path, size and mtime (node alone is ~100 MB). */
async function hashHostFile(path: string): Promise<{ sha256: string; size: number; mode: number }> {
  const info = await stat(path);
  const key = `${path}\0${info.size}\0${info.mtimeMs}`;
  let sha256 = hashCache.get(key);
  if (!sha256) {
    const hash = createHash("sha256");
    await pipeline(createReadStream(path), async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) hash.update(chunk);
    });
    sha256 = hash.digest("hex");
    hashCache.set(key, sha256);
  }
  return { sha256, size: info.size, mode: info.mode & 0o777 };
}

async function hostFile(imagePath: string, hostPath: string): Promise<ImageFile> {
  const source = await realpath(hostPath);
  const { sha256, size, mode } = await hashHostFile(source);
  return { path: imagePath, source, sha256, size, mode };
}

async function bufferFile(imagePath: string, hostPath: string): Promise<ImageFile> {
  const [content, info] = await Promise.all([readFile(hostPath), stat(hostPath)]);
  return {
    path: imagePath,
    content,
    size: content.length,
    sha256: createHash("sha256").update(content).digest("hex"),
    mode: info.mode & 0o111 ? 0o755 : 0o644,
  };
}

async function lddLibraries(binary: string): Promise<string[]> {
  let stdout: string;
  try {
    stdout = (await promisify(execFile)("ldd", [binary], { encoding: "utf8" })).stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string };
    // ldd exits non-zero for static binaries ("not a dynamic executable"): nothing to copy then.
    if (e.code === "ENOENT")
      throw new UserError("Cannot build the worker image: `ldd` is not installed", {
        hint: "Install the libc tools (Debian: apt-get install libc-bin).",
        cause: err,
      });
    if (typeof e.stdout === "string" && /not a dynamic executable/.test(`${e.stdout}${(e as { stderr?: string }).stderr ?? ""}`)) return [];
    throw new UserError(`Cannot build the worker image: ldd ${binary} failed (${errorMessage(err)})`, { cause: err });
  }
  const libraries = parseLdd(stdout);
  // Name resolution (the svc-api host alias, DNS) loads these with dlopen, so ldd does not list them.
  const libc = libraries.find((p) => /\/libc\.so\.6$/.test(p));
  if (libc) {
    for (const extra of ["libnss_files.so.2", "libnss_dns.so.2", "libresolv.so.2"]) {
      const candidate = join(dirname(libc), extra);
      if (existsSync(candidate)) libraries.push(candidate);
    }
  }
  return libraries;
}

/**
 * The node_modules directories Node would search from `root` (root's own, then its ancestors'), each also under
 * its real path: esbuild reports resolved paths, and a node_modules may be a symlink (a git worktree sharing one).
 */
function moduleBases(root: string): string[] {
  const bases: string[] = [];
  for (let dir = resolve(root); ; dir = dirname(dir)) {
    const base = join(dir, "node_modules");
    bases.push(base);
    if (existsSync(base)) {
      const real = realpathSync(base);
      if (real !== base) bases.push(real);
    }
    if (dirname(dir) === dir) return bases;
  }
}

/**
 * The packages under `bases` that are symbolic links (npm workspaces link `node_modules/svc` to `packages/svc`),
 * by their real directory: esbuild and Node report a linked package's files under its real path.
 */
function linkedPackages(bases: readonly string[]): Map<string, string> {
  const linked = new Map<string, string>();
  for (const base of new Set(bases)) {
    if (!existsSync(base)) continue;
    for (const entry of readdirSync(base, { withFileTypes: true })) {
      const names =
        entry.name.startsWith("@") && entry.isDirectory()
          ? readdirSync(join(base, entry.name), { withFileTypes: true })
              .filter((e) => e.isSymbolicLink())
              .map((e) => `${entry.name}/${e.name}`)
          : entry.isSymbolicLink()
            ? [entry.name]
            : [];
      for (const name of names) linked.set(realpathSync(join(base, name)), name);
    }
  }
  return linked;
}

/** A package the runtime reaches; `files` (relative) when only those are needed, else the whole directory. */
export interface ClosurePackage {
  name: string;
  dir: string;
  files?: string[];
}

/**
 * The dist files and the package directories the runtime entry reaches (via esbuild's metafile). A linked
 * (workspace) package contributes its package.json and the files reached, not its sources and build tooling.
 */
export async function runtimeClosure(packageRoot: string): Promise<{ distFiles: string[]; packages: ClosurePackage[] }> {
  const entry = join(packageRoot, "dist", "runtime", "worker.js");
  if (!existsSync(entry)) {
    throw new UserError(`Cannot build the worker image: the worker runtime is not compiled (${entry} is missing)`, {
      hint: "Compile svc first: npm run build.",
    });
  }
  let metafile: esbuild.Metafile;
  try {
    const result = await esbuild.build({
      absWorkingDir: packageRoot,
      entryPoints: [entry],
      bundle: true,
      write: false,
      platform: "node",
      format: "esm",
      outfile: join(packageRoot, "worker-closure.mjs"),
      metafile: true,
      logLevel: "silent",
    });
    metafile = result.metafile;
  } catch (err) {
    throw new UserError(`Cannot build the worker image: the worker runtime's imports do not resolve (${errorMessage(err)})`, { cause: err });
  }
  const dist = join(packageRoot, "dist") + sep;
  const bases = moduleBases(packageRoot);
  const linked = linkedPackages(bases);
  const distFiles = new Set<string>();
  const packages = new Map<string, ClosurePackage>();
  for (const input of Object.keys(metafile.inputs)) {
    const file = resolve(packageRoot, input);
    if (file.startsWith(dist)) {
      distFiles.add(file);
      continue;
    }
    const base = bases.find((b) => file.startsWith(b + sep));
    if (base) {
      const parts = relative(base, file).split(sep);
      const name = parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
      if (!packages.has(name)) packages.set(name, { name, dir: join(base, name) });
      continue;
    }
    const real = [...linked.keys()].find((dir) => file.startsWith(dir + sep));
    if (!real) throw new UserError(`Cannot build the worker image: the runtime imports ${file}, outside dist/ and node_modules`);
    const name = linked.get(real)!;
    const pkg = packages.get(name) ?? { name, dir: real, files: ["package.json"] };
    pkg.files?.push(relative(real, file).split(sep).join("/"));
    packages.set(name, pkg);
  }
  return {
    distFiles: [...distFiles].sort(),
    packages: [...packages.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
  };
}

/** Node, the libraries it links and the CA bundle: what every image runs on. */
async function collectSystemFiles(nodePath: string): Promise<{ system: ImageFile[]; hasCaBundle: boolean }> {
  const system: ImageFile[] = [await hostFile(NODE_IN_IMAGE, nodePath)];
  for (const library of await lddLibraries(await realpath(nodePath))) system.push(await hostFile(library, library));
  const hasCaBundle = existsSync(CA_BUNDLE);
  if (hasCaBundle) system.push(await hostFile(CA_BUNDLE, CA_BUNDLE));
  return { system, hasCaBundle };
}

export async function collectImageInputs(options: CollectOptions = {}): Promise<ImageInputs> {
  const packageRoot = resolve(options.packageRoot ?? SVC_PACKAGE_ROOT);
  const { system, hasCaBundle } = await collectSystemFiles(options.nodePath ?? process.execPath);

  const closure = await runtimeClosure(packageRoot);
  const runtime: ImageFile[] = [];
  for (const file of closure.distFiles) runtime.push(await bufferFile(`${RUNTIME_ROOT}/${relative(packageRoot, file).split(sep).join("/")}`, file));
  for (const pkg of closure.packages) {
    const files = pkg.files ?? (await fg("**", { cwd: pkg.dir, dot: true, onlyFiles: true, followSymbolicLinks: false, ignore: ["**/.bin/**"] }));
    for (const rel of [...files].sort()) runtime.push(await bufferFile(`${RUNTIME_ROOT}/node_modules/${pkg.name}/${rel}`, join(pkg.dir, rel)));
  }
  return { system, runtime, hasCaBundle };
}

/** Where Node finds package `name` when `from` (a real path) requires it: the first `node_modules/<name>` up. */
function resolvePackage(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return realpathSync(candidate);
    if (dirname(dir) === dir) return undefined;
  }
}

interface PackageJson {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/**
 * Every package `svc` needs at run time: its dependencies and optional dependencies, and theirs (peers too),
 * transitively, as Node resolves them; each with its directory under node_modules in the image (nesting kept).
 * Missing optional dependencies (another platform's binaries) are skipped; a missing required one is refused.
 */
export async function productionPackages(packageRoot: string): Promise<Array<{ dir: string; imageDir: string; linked?: boolean }>> {
  const root = realpathSync(packageRoot);
  const bases = moduleBases(packageRoot)
    .filter((b) => existsSync(b))
    .map((b) => realpathSync(b));
  const linked = linkedPackages(bases);
  const found = new Map<string, string>();
  const visit = async (from: string, pkg: PackageJson) => {
    const required = new Set([
      ...Object.keys(pkg.dependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}).filter((p) => !pkg.peerDependenciesMeta?.[p]?.optional),
    ]);
    const names = [...required, ...Object.keys(pkg.optionalDependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
    for (const name of [...new Set(names)].sort()) {
      const dir = resolvePackage(from, name);
      if (!dir) {
        if (required.has(name) && !pkg.optionalDependencies?.[name])
          throw new UserError(`Cannot build the server image: package ${name} (needed by ${from}) is not installed`, {
            hint: "Install svc's dependencies first: npm ci --omit=dev.",
          });
        continue;
      }
      if (found.has(dir)) continue;
      const base = bases.find((b) => dir.startsWith(b + sep));
      if (!base && linked.has(dir)) {
        found.set(dir, `${RUNTIME_ROOT}/node_modules/${linked.get(dir)}`);
        await visit(dir, JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as PackageJson);
        continue;
      }
      if (!base) throw new UserError(`Cannot build the server image: package ${name} resolves to ${dir}, outside the node_modules svc is run from`);
      found.set(dir, `${RUNTIME_ROOT}/node_modules/${relative(base, dir).split(sep).join("/")}`);
      await visit(dir, JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as PackageJson);
    }
  };
  await visit(root, JSON.parse(await readFile(join(root, "package.json"), "utf8")) as PackageJson);
  return [...found]
    .map(([dir, imageDir]) => (linked.has(dir) ? { dir, imageDir, linked: true } : { dir, imageDir }))
    .sort((a, b) => (a.imageDir < b.imageDir ? -1 : 1));
}

/**
 * The files a linked (workspace) package would publish: its package.json and what its "files" field names; a
 * checkout's sources, tests and node_modules stay out of the image as they stay out of the package.
 */
async function publishedFiles(dir: string): Promise<string[]> {
  const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as { files?: string[] };
  if (!pkg.files) return fg("**", { cwd: dir, dot: true, onlyFiles: true, followSymbolicLinks: false, ignore: ["node_modules/**"] });
  const patterns = pkg.files.flatMap((entry) => [entry, `${entry.replace(/\/$/, "")}/**`]);
  const files = await fg(patterns, { cwd: dir, dot: true, onlyFiles: true, followSymbolicLinks: false, ignore: ["node_modules/**"] });
  return [...new Set(["package.json", ...files])];
}

/** What the server image holds besides the system files: svc itself under RUNTIME_ROOT. */
export interface ServerImageInputs {
  system: ImageFile[];
  /** dist/, bin/, templates/ and the production packages. */
  app: ImageFile[];
  hasCaBundle: boolean;
}

export async function collectServerInputs(options: CollectOptions = {}): Promise<ServerImageInputs> {
  const packageRoot = resolve(options.packageRoot ?? SVC_PACKAGE_ROOT);
  if (!existsSync(join(packageRoot, "dist", "cli", "main.js"))) {
    throw new UserError(`Cannot build the server image: svc is not compiled (${join(packageRoot, "dist", "cli", "main.js")} is missing)`, {
      hint: "Compile svc first: npm run build.",
    });
  }
  const { system, hasCaBundle } = await collectSystemFiles(options.nodePath ?? process.execPath);
  const app: ImageFile[] = [];
  for (const dir of ["dist", "bin", "templates"]) {
    if (!existsSync(join(packageRoot, dir))) continue;
    const files = await fg("**", { cwd: join(packageRoot, dir), dot: true, onlyFiles: true, followSymbolicLinks: false });
    for (const rel of files.sort()) app.push(await bufferFile(`${RUNTIME_ROOT}/${dir}/${rel}`, join(packageRoot, dir, rel)));
  }
  for (const pkg of await productionPackages(packageRoot)) {
    // Nested node_modules are packages of their own (listed by productionPackages when reachable).
    const files = pkg.linked
      ? await publishedFiles(pkg.dir)
      : await fg("**", { cwd: pkg.dir, dot: true, onlyFiles: true, followSymbolicLinks: false, ignore: ["node_modules/**", "**/.bin/**"] });
    // Streamed from disk, not held in memory: the packages are ~150 MB (the Kubernetes client, better-sqlite3...).
    for (const rel of files.sort()) app.push(await hostFile(`${pkg.imageDir}/${rel}`, join(pkg.dir, rel)));
  }
  return { system, app, hasCaBundle };
}
