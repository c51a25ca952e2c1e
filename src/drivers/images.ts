// Worker base images, built locally with no registry: a root filesystem made of this machine's Node binary and
// the shared libraries it links (ldd), CA certificates, a minimal /etc with a non-root user, and the svc worker
// runtime (the dist/ files the runtime reaches plus the production packages it imports), streamed as a tar into
// `docker import` with Cmd/Env/WorkingDir/User/Labels set. The endpoint's artifact is never baked in: drivers
// mount it at run time, so code changes never need an image build.
//
// Images are cached by content hash: `<repo>:<hash>` names exactly one set of inputs, and `<repo>:<svc version>`
// (the manifest's imageName) points at the newest build. Same inputs again: nothing is built.
//
// The server image (`svc-server`, `svc images build --server`) is made the same way from the same Node: svc's
// dist/, bin/ and templates/ and every production package (the native better-sqlite3 included), with `svc server`
// as its entry. It is what `deploy/swarm/svc-stack.yml` runs (docs/cluster.md).
//
// Three steps: collectImageInputs / collectServerInputs (read the host), planWorkerImage / planServerImage /
// planImageAction (pure), applyImagePlan (talks to the engine).

import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, realpathSync } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import type Docker from "dockerode";
import * as esbuild from "esbuild";
import fg from "fast-glob";
import tarStream from "tar-stream";
import { imageNameFor } from "../build/manifest.js";
import { errorMessage, UserError } from "../errors.js";
import { SVC_PACKAGE_ROOT, SVC_VERSION } from "../version.js";
import { dockerMessage, LABELS } from "./docker-engine.js";
import { WORKER_GID, WORKER_UID } from "./isolation.js";

export type WorkerImageKind = "cpu" | "gpu";
export const WORKER_IMAGE_KINDS: readonly WorkerImageKind[] = ["cpu", "gpu"];
/** Every image svc builds: the two worker images and the server's. */
export type ImageKind = WorkerImageKind | "server";

/** Bump when the image layout changes in a way the inputs do not show (it is part of the hash). */
export const IMAGE_LAYOUT_VERSION = 1;
export const WORKER_USER = { name: "svc", uid: WORKER_UID, gid: WORKER_GID, home: "/home/svc" } as const;
export const NODE_IN_IMAGE = "/usr/local/bin/node";
export const RUNTIME_ROOT = "/opt/svc";
export const RUNTIME_ENTRY_IN_IMAGE = `${RUNTIME_ROOT}/dist/runtime/worker.js`;
/** Where drivers mount the endpoint's network volume (docs/worker-protocol.md). */
export const VOLUME_MOUNT = "/svc-volume";
/** Where drivers mount the artifact (read-only). */
export const ARTIFACT_MOUNT = "/svc/artifact.tar.gz";
const CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
const FIXED_MTIME = new Date(Date.UTC(2000, 0, 1));

export const SERVER_IMAGE_REPO = "svc-server";
/** The server image's data directory (caches only when the state is in PostgreSQL) and port. */
export const SERVER_DATA_DIR = "/var/lib/svc";
export const SERVER_PORT = 8600;

export function workerImageRepo(kind: WorkerImageKind): string {
  return kind === "gpu" ? "svc-worker-gpu" : "svc-worker-cpu";
}

export function imageRepo(kind: ImageKind): string {
  return kind === "server" ? SERVER_IMAGE_REPO : workerImageRepo(kind);
}

/** `svc-server:<svc version>`: the server image's name. */
export function serverImageName(version = SVC_VERSION): string {
  return `${SERVER_IMAGE_REPO}:${version}`;
}

/** `<repo>:<svc version>`: what the manifest's imageName says. */
export function workerImageName(kind: WorkerImageKind, version = SVC_VERSION): string {
  return imageNameFor(kind === "gpu" ? "GPU" : "CPU", version);
}

export function imageKindOf(computeType: "GPU" | "CPU"): WorkerImageKind {
  return computeType === "GPU" ? "gpu" : "cpu";
}

// ---------------------------------------------------------------------------------------------------------
// Inputs (reads the host)

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
    throw new UserError(`Cannot build the worker image: Node's shared libraries are missing on this machine`, { problems: missing.map((m) => `${m} => not found`) });
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
  return { path: imagePath, content, size: content.length, sha256: createHash("sha256").update(content).digest("hex"), mode: info.mode & 0o111 ? 0o755 : 0o644 };
}

async function lddLibraries(binary: string): Promise<string[]> {
  let stdout: string;
  try {
    stdout = (await promisify(execFile)("ldd", [binary], { encoding: "utf8" })).stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string };
    // ldd exits non-zero for static binaries ("not a dynamic executable"): nothing to copy then.
    if (e.code === "ENOENT") throw new UserError("Cannot build the worker image: `ldd` is not installed", { hint: "Install the libc tools (Debian: apt-get install libc-bin).", cause: err });
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
      const names = entry.name.startsWith("@") && entry.isDirectory()
        ? readdirSync(join(base, entry.name), { withFileTypes: true }).filter((e) => e.isSymbolicLink()).map((e) => `${entry.name}/${e.name}`)
        : entry.isSymbolicLink() ? [entry.name] : [];
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
    throw new UserError(`Cannot build the worker image: the worker runtime is not compiled (${entry} is missing)`, { hint: "Compile svc first: npm run build." });
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
    const files = pkg.files ?? await fg("**", { cwd: pkg.dir, dot: true, onlyFiles: true, followSymbolicLinks: false, ignore: ["**/.bin/**"] });
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
  const bases = moduleBases(packageRoot).filter((b) => existsSync(b)).map((b) => realpathSync(b));
  const linked = linkedPackages(bases);
  const found = new Map<string, string>();
  const visit = async (from: string, pkg: PackageJson) => {
    const required = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {}).filter((p) => !pkg.peerDependenciesMeta?.[p]?.optional)]);
    const names = [...required, ...Object.keys(pkg.optionalDependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
    for (const name of [...new Set(names)].sort()) {
      const dir = resolvePackage(from, name);
      if (!dir) {
        if (required.has(name) && !pkg.optionalDependencies?.[name]) throw new UserError(`Cannot build the server image: package ${name} (needed by ${from}) is not installed`, { hint: "Install svc's dependencies first: npm ci --omit=dev." });
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
    throw new UserError(`Cannot build the server image: svc is not compiled (${join(packageRoot, "dist", "cli", "main.js")} is missing)`, { hint: "Compile svc first: npm run build." });
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

// ---------------------------------------------------------------------------------------------------------
// Plan (pure)

export interface ImageEntry {
  /** Absolute path inside the image. */
  path: string;
  type: "file" | "directory";
  mode: number;
  uid: number;
  gid: number;
  file?: ImageFile;
}

export interface ImageConfig {
  /** The server image's (`node svc.js`); worker images have none. */
  entrypoint?: string[];
  cmd: string[];
  env: Record<string, string>;
  workingDir: string;
  user: string;
  labels: Record<string, string>;
}

export interface ImagePlan {
  kind: ImageKind;
  repo: string;
  /** Content hash of every entry and the config (hex, 64). */
  hash: string;
  /** `<repo>:<hash prefix>` */
  hashTag: string;
  /** `<repo>:<svc version>` */
  versionTag: string;
  entries: ImageEntry[];
  config: ImageConfig;
}

function textFile(path: string, text: string, mode = 0o644): ImageFile {
  const content = Buffer.from(text);
  return { path, mode, content, size: content.length, sha256: createHash("sha256").update(content).digest("hex") };
}

export function imageConfig(kind: WorkerImageKind, hasCaBundle: boolean): ImageConfig {
  const env: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: WORKER_USER.home,
    NODE_ENV: "production",
    SVC_IMAGE_KIND: kind,
  };
  if (hasCaBundle) env.NODE_EXTRA_CA_CERTS = CA_BUNDLE;
  if (kind === "gpu") {
    // Read by the NVIDIA container runtime at run time; plain runc ignores it. Which GPUs a container sees is
    // never the image's to say (no NVIDIA_VISIBLE_DEVICES=all): its device request and environment name them.
    env.NVIDIA_DRIVER_CAPABILITIES = "compute,utility";
  }
  return {
    cmd: [NODE_IN_IMAGE, RUNTIME_ENTRY_IN_IMAGE],
    env,
    workingDir: WORKER_USER.home,
    user: `${WORKER_USER.uid}:${WORKER_USER.gid}`,
    labels: { [LABELS.managed]: "true", [LABELS.imageKind]: kind },
  };
}

/** Entries of a root filesystem: the directories given, then the files with their parent directories; sorted. */
function layout(directories: readonly ImageEntry[], files: readonly ImageFile[]): ImageEntry[] {
  const entries = new Map<string, ImageEntry>();
  for (const d of directories) entries.set(d.path, d);
  for (const file of files) {
    for (let dir = dirname(file.path); dir !== "/"; dir = dirname(dir)) {
      if (!entries.has(dir)) entries.set(dir, { path: dir, type: "directory", mode: 0o755, uid: 0, gid: 0 });
    }
    entries.set(file.path, { path: file.path, type: "file", mode: file.mode, uid: 0, gid: 0, file });
  }
  return [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The plan of one image: its entries, and the hash of all of them with its config, naming it. */
function planOf(kind: ImageKind, entries: ImageEntry[], baseConfig: ImageConfig, version: string): ImagePlan {
  const hash = createHash("sha256")
    .update(JSON.stringify({ layout: IMAGE_LAYOUT_VERSION, kind, version, config: baseConfig }))
    .update("\n");
  for (const e of entries) hash.update(`${e.type} ${e.path} ${e.mode.toString(8)} ${e.uid}:${e.gid} ${e.file?.sha256 ?? ""}\n`);
  const digest = hash.digest("hex");
  const repo = imageRepo(kind);
  const config: ImageConfig = { ...baseConfig, labels: { ...baseConfig.labels, [LABELS.imageHash]: digest, [LABELS.version]: version } };
  return { kind, repo, hash: digest, hashTag: `${repo}:${digest.slice(0, 20)}`, versionTag: `${repo}:${version}`, entries, config };
}

const NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n";

/** Every entry of the root filesystem and the image config, with the hash that names them. */
export function planWorkerImage(kind: WorkerImageKind, inputs: ImageInputs, version = SVC_VERSION): ImagePlan {
  const { uid, gid } = WORKER_USER;
  const files: ImageFile[] = [
    ...inputs.system,
    ...inputs.runtime,
    // Only what the runtime reads (version.js reads "version"); the real package.json would churn the hash.
    textFile(`${RUNTIME_ROOT}/package.json`, `${JSON.stringify({ name: "svc", version, type: "module", private: true })}\n`),
    textFile("/etc/passwd", `root:x:0:0:root:/root:/sbin/nologin\n${WORKER_USER.name}:x:${uid}:${gid}:svc worker:${WORKER_USER.home}:/sbin/nologin\n`),
    textFile("/etc/group", `root:x:0:\n${WORKER_USER.name}:x:${gid}:\n`),
    textFile("/etc/nsswitch.conf", NSSWITCH),
  ];
  const directory = (path: string, mode = 0o755, owner = 0): ImageEntry => ({ path, type: "directory", mode, uid: owner, gid: owner });
  // Writable places: /tmp for everyone (artifact extraction), the worker's home and the volume mount point
  // (Docker copies a mount point's owner into a fresh named volume, so the worker can write to it).
  const directories = [directory("/tmp", 0o1777), directory(WORKER_USER.home, 0o755, uid), directory(VOLUME_MOUNT, 0o755, uid), directory(dirname(ARTIFACT_MOUNT))];
  return planOf(kind, layout(directories, files), imageConfig(kind, inputs.hasCaBundle), version);
}

/** The server image's config: `svc server` on all interfaces of the container, its data directory set. Pure. */
export function serverImageConfig(hasCaBundle: boolean): ImageConfig {
  const env: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: "/root",
    NODE_ENV: "production",
    SVC_IMAGE_KIND: "server",
    SVC_DATA_DIR: SERVER_DATA_DIR,
  };
  if (hasCaBundle) env.NODE_EXTRA_CA_CERTS = CA_BUNDLE;
  return {
    entrypoint: [NODE_IN_IMAGE, `${RUNTIME_ROOT}/bin/svc.js`],
    cmd: ["server", "--host", "0.0.0.0", "--port", String(SERVER_PORT)],
    env,
    workingDir: SERVER_DATA_DIR,
    // Root: the server drives the engine through its socket (root:docker on the host, a gid that differs per
    // host), which is root's power anyway.
    user: "0:0",
    labels: { [LABELS.managed]: "true", [LABELS.imageKind]: "server" },
  };
}

/** The server image: svc's dist/, bin/, templates/ and production packages on this machine's Node. Pure. */
export function planServerImage(inputs: ServerImageInputs, version = SVC_VERSION): ImagePlan {
  const files: ImageFile[] = [
    ...inputs.system,
    ...inputs.app,
    // version.js reads "version"; "type" makes dist/ ES modules. The real package.json would churn the hash.
    textFile(`${RUNTIME_ROOT}/package.json`, `${JSON.stringify({ name: "svc", version, type: "module", private: true, bin: { svc: "bin/svc.js" } })}\n`),
    textFile("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"),
    textFile("/etc/group", "root:x:0:\n"),
    textFile("/etc/nsswitch.conf", NSSWITCH),
  ];
  const directory = (path: string, mode = 0o755): ImageEntry => ({ path, type: "directory", mode, uid: 0, gid: 0 });
  return planOf("server", layout([directory("/tmp", 0o1777), directory("/root", 0o700), directory(SERVER_DATA_DIR, 0o700)], files), serverImageConfig(inputs.hasCaBundle), version);
}

/** `docker import` changes (Dockerfile instructions) for the config. */
export function importChanges(config: ImageConfig): string[] {
  return [
    ...(config.entrypoint ? [`ENTRYPOINT ${JSON.stringify(config.entrypoint)}`] : []),
    `CMD ${JSON.stringify(config.cmd)}`,
    ...Object.entries(config.env).map(([key, value]) => `ENV ${key}=${value}`),
    `WORKDIR ${config.workingDir}`,
    `USER ${config.user}`,
    ...Object.entries(config.labels).map(([key, value]) => `LABEL ${key}=${value}`),
  ];
}

export interface ExistingImage {
  id: string;
  tags: string[];
}

export type ImageAction = { action: "cached"; id: string } | { action: "tag"; id: string } | { action: "build" };

/** Reuse the image built from the same inputs (adding the version tag when it moved elsewhere); else build. */
export function planImageAction(plan: ImagePlan, existing: readonly ExistingImage[]): ImageAction {
  const same = existing.find((image) => image.tags.includes(plan.hashTag));
  if (!same) return { action: "build" };
  return same.tags.includes(plan.versionTag) ? { action: "cached", id: same.id } : { action: "tag", id: same.id };
}

// ---------------------------------------------------------------------------------------------------------
// Apply (talks to the engine)

function splitTag(tag: string): { repo: string; tag: string } {
  const at = tag.lastIndexOf(":");
  return { repo: tag.slice(0, at), tag: tag.slice(at + 1) };
}

/** The root filesystem as a tar stream (entries in plan order; mtimes fixed). */
export function rootfsTar(plan: ImagePlan): NodeJS.ReadableStream {
  const pack = tarStream.pack();
  void (async () => {
    for (const entry of plan.entries) {
      const header = { name: entry.path.slice(1), mode: entry.mode, uid: entry.uid, gid: entry.gid, mtime: FIXED_MTIME };
      if (entry.type === "directory") {
        pack.entry({ ...header, type: "directory" });
        continue;
      }
      const file = entry.file!;
      if (file.content) {
        pack.entry({ ...header, type: "file", size: file.size }, file.content);
        continue;
      }
      const sink = pack.entry({ ...header, type: "file", size: file.size });
      await pipeline(createReadStream(file.source!), sink);
    }
    pack.finalize();
  })().catch((err: unknown) => pack.destroy(err as Error));
  // A streamx Readable: pipe() is all dockerode uses.
  return pack as unknown as NodeJS.ReadableStream;
}

const imageTitle = (kind: ImageKind) => (kind === "server" ? "server image" : `${kind} worker image`);

async function importTar(docker: Docker, plan: ImagePlan): Promise<string> {
  const { repo, tag } = splitTag(plan.hashTag);
  let messages: Array<{ status?: string; error?: string; errorDetail?: { message?: string } }>;
  try {
    const progress = await docker.importImage(rootfsTar(plan), { repo, tag, changes: importChanges(plan.config), message: `svc ${imageTitle(plan.kind)}` });
    messages = await new Promise((resolve, reject) => docker.modem.followProgress(progress, (err, output) => (err ? reject(err) : resolve(output as typeof messages))));
  } catch (err) {
    throw new UserError(`Docker could not import the ${imageTitle(plan.kind)}: ${dockerMessage(err)}`, { cause: err });
  }
  const failure = messages.find((m) => m.error || m.errorDetail);
  if (failure) throw new UserError(`Docker could not import the ${imageTitle(plan.kind)}: ${failure.error ?? failure.errorDetail?.message}`);
  const inspected = await docker.getImage(plan.hashTag).inspect();
  return inspected.Id;
}

export async function existingWorkerImages(docker: Docker, kind?: ImageKind): Promise<Docker.ImageInfo[]> {
  return docker.listImages({ filters: { label: [kind ? `${LABELS.imageKind}=${kind}` : LABELS.imageKind] } });
}

export interface EnsuredImage {
  kind: ImageKind;
  id: string;
  /** `<repo>:<svc version>` */
  name: string;
  hashTag: string;
  hash: string;
  /** True when an image with the same inputs already existed (nothing was built). */
  cached: boolean;
  durationMs: number;
}

/**
 * Images of the same kind and svc version that a new build replaced: each is a full root filesystem (~100 MB,
 * one layer), and while svc itself is being developed every compile changes the runtime's hash. Pure.
 */
export function supersededImages(plan: ImagePlan, currentId: string, images: readonly Docker.ImageInfo[]): string[] {
  return images
    .filter((i) => i.Id !== currentId && i.Labels?.[LABELS.imageKind] === plan.kind && i.Labels?.[LABELS.version] === plan.versionTag.slice(plan.repo.length + 1))
    .map((i) => i.Id);
}

export async function applyImagePlan(docker: Docker, plan: ImagePlan): Promise<{ id: string; cached: boolean }> {
  const images = await existingWorkerImages(docker, plan.kind);
  const action = planImageAction(plan, images.map((i) => ({ id: i.Id, tags: i.RepoTags ?? [] })));
  const id = action.action === "build" ? await importTar(docker, plan) : action.id;
  if (action.action !== "cached") {
    const { repo, tag } = splitTag(plan.versionTag);
    await docker.getImage(id).tag({ repo, tag });
    for (const old of supersededImages(plan, id, images)) {
      // Not forced: the engine keeps an image a container (even a stopped one) still uses.
      await docker.getImage(old).remove().catch(() => undefined /* still in use (or gone): kept until a later build */);
    }
  }
  return { id, cached: action.action !== "build" };
}

/** Build (or find cached) the worker image of `kind`. */
export async function ensureWorkerImage(docker: Docker, kind: WorkerImageKind, options: CollectOptions & { inputs?: ImageInputs } = {}): Promise<EnsuredImage> {
  const started = Date.now();
  const inputs = options.inputs ?? (await collectImageInputs(options));
  const plan = planWorkerImage(kind, inputs);
  const { id, cached } = await applyImagePlan(docker, plan);
  return { kind, id, name: plan.versionTag, hashTag: plan.hashTag, hash: plan.hash, cached, durationMs: Date.now() - started };
}

/** Build (or find cached) the server image, `svc-server:<svc version>`. */
export async function ensureServerImage(docker: Docker, options: CollectOptions = {}): Promise<EnsuredImage> {
  const started = Date.now();
  const plan = planServerImage(await collectServerInputs(options));
  const { id, cached } = await applyImagePlan(docker, plan);
  return { kind: "server", id, name: plan.versionTag, hashTag: plan.hashTag, hash: plan.hash, cached, durationMs: Date.now() - started };
}

/** Both kinds share one collection of inputs. */
export async function ensureWorkerImages(docker: Docker, kinds: readonly WorkerImageKind[], options: CollectOptions = {}): Promise<EnsuredImage[]> {
  const inputs = await collectImageInputs(options);
  const out: EnsuredImage[] = [];
  for (const kind of kinds) out.push(await ensureWorkerImage(docker, kind, { ...options, inputs }));
  return out;
}

export interface WorkerImageInfo {
  kind: ImageKind;
  id: string;
  tags: string[];
  hash: string;
  version: string;
  createdAt: string;
  sizeBytes: number;
  /** Containers (running or stopped) made from it. */
  containers: number;
}

export async function listWorkerImages(docker: Docker): Promise<WorkerImageInfo[]> {
  const [images, containers] = await Promise.all([existingWorkerImages(docker), docker.listContainers({ all: true })]);
  const uses = new Map<string, number>();
  for (const c of containers) uses.set(c.ImageID, (uses.get(c.ImageID) ?? 0) + 1);
  return images
    .map((image) => ({
      kind: (image.Labels?.[LABELS.imageKind] ?? "cpu") as ImageKind,
      id: image.Id,
      tags: (image.RepoTags ?? []).filter((t) => t !== "<none>:<none>").sort(),
      hash: image.Labels?.[LABELS.imageHash] ?? "",
      version: image.Labels?.[LABELS.version] ?? "",
      createdAt: new Date(image.Created * 1000).toISOString(),
      sizeBytes: image.Size,
      containers: uses.get(image.Id) ?? 0,
    }))
    .sort((a, b) => (a.kind === b.kind ? b.createdAt.localeCompare(a.createdAt) : a.kind < b.kind ? -1 : 1));
}

/** Which images prune removes: unused ones, keeping those tagged with the current version unless `all`. Pure. */
export function planPrune(images: readonly WorkerImageInfo[], options: { all?: boolean; version?: string } = {}): WorkerImageInfo[] {
  const version = options.version ?? SVC_VERSION;
  return images.filter((image) => image.containers === 0 && (options.all || !image.tags.some((t) => t.endsWith(`:${version}`))));
}

export async function pruneWorkerImages(docker: Docker, options: { all?: boolean } = {}): Promise<{ removed: WorkerImageInfo[]; kept: WorkerImageInfo[] }> {
  const images = await listWorkerImages(docker);
  const doomed = planPrune(images, options);
  const removed: WorkerImageInfo[] = [];
  for (const image of doomed) {
    try {
      // force: an image with several tags (version + hash) is only removable by id that way; unused, checked above.
      await docker.getImage(image.id).remove({ force: true });
      removed.push(image);
    } catch (err) {
      throw new UserError(`Could not remove worker image ${image.tags[0] ?? image.id}: ${dockerMessage(err)}`, { cause: err });
    }
  }
  return { removed, kept: images.filter((i) => !removed.includes(i)) };
}
