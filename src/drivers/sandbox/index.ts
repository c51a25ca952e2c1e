// The sandbox process workers run in: Debian's bubblewrap (user, mount, pid, IPC and UTS namespaces, a seccomp
// filter, a private /tmp), with cgroup limits where the service can make cgroups. `resolveSandbox` decides from
// the setting (auto, bwrap, none) and what works on this host; `spawn` starts one sandboxed process and tells
// its host pid. docs/security.md, "Process workers".

import { attachNetwork, probePasta, type AttachedNetwork } from "./pasta.js";
import { spawn, spawnSync, type ChildProcess, type StdioOptions } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import type { Readable, Writable } from "node:stream";
import { UserError } from "../../errors.js";
import {
  bwrapArgs,
  encodeArgs,
  ETC_FILES,
  identityFiles,
  SANDBOX_CODE_DIR,
  SANDBOX_HOME,
  SANDBOX_MODELS_DIR,
  SANDBOX_RUN_DIR,
  SANDBOX_VOLUME_DIR,
  SYSTEM_DIRS,
  systemMounts,
  type BindMount,
  type BwrapSpec,
} from "./bwrap.js";
import { detectCgroups, type CgroupLimits, type Cgroups, type WorkerCgroup } from "./cgroups.js";
import { encodeProgram, seccompArch, seccompProgram } from "./seccomp.js";
import { ownedTempPrefix } from "../owned-temp.js";

export { SANDBOX_CODE_DIR, SANDBOX_MODELS_DIR, SANDBOX_RUN_DIR, SANDBOX_VOLUME_DIR, SANDBOX_HOME } from "./bwrap.js";
export type { CgroupLimits } from "./cgroups.js";

export const SANDBOX_SETTINGS = ["auto", "bwrap", "none"] as const;
export type SandboxSetting = (typeof SANDBOX_SETTINGS)[number];

/** Limits of endpoints whose instance does not name them (GPU endpoints), and of every worker's /tmp. */
export interface SandboxDefaults {
  /** Memory of a worker whose endpoint's instance names none (default: none). */
  memoryMb?: number;
  /** Processes and threads of a worker (default 1024). */
  pids: number;
  /** Size of a worker's private /tmp (default 1024 MiB, and at most its memory; it counts as memory too). */
  tmpMb: number;
  /** Size of a worker's /dev/shm (default 64 MiB, and at most its memory; memory too). */
  shmMb: number;
}

export const DEFAULT_SANDBOX_DEFAULTS: SandboxDefaults = { pids: 1024, tmpMb: 1024, shmMb: 64 };

export interface SandboxOptions {
  setting: SandboxSetting;
  /** The bwrap binary (default: `bwrap` on PATH). */
  bwrapPath?: string;
  defaults?: Partial<SandboxDefaults>;
  /** Make no cgroups even where the service could (tests of the limits' absence). */
  noCgroups?: boolean;
  /** No seccomp filter (tests showing what the filter stops). */
  noSeccomp?: boolean;
  /**
   * Workers' network: "auto" (the default) a namespace of their own connected by pasta where pasta is installed,
   * else the host's; "host" the host's (tests of what the namespace stops).
   */
  network?: "auto" | "host";
  /** The pasta binary (default: `pasta` on PATH). */
  pastaPath?: string;
}

/** No sandbox: why, and how the isolation is described. */
export interface NoSandbox {
  kind: "none";
  /** Why there is none: the setting, or what did not work. */
  reason: string;
  description: string;
}

/** What one sandboxed process is started with. */
export interface SandboxLaunch {
  nodePath: string;
  /** The runtime entry (host path): its package's dist/ and node_modules are mounted read-only. */
  entry: string;
  /** The worker's code (host path), mounted read-only at SANDBOX_CODE_DIR. */
  codeDir: string;
  /** Its volume (host path), read-write at SANDBOX_VOLUME_DIR. */
  volumeDir?: string;
  /** The host's model cache (host path), read-only at SANDBOX_MODELS_DIR. */
  modelsDir?: string;
  /** Its run directory (host path), read-write at SANDBOX_RUN_DIR. */
  runDir?: string;
  env: Record<string, string>;
  /** Its cgroup's name (the worker id, or a pool slot's). */
  name: string;
  limits: CgroupLimits;
  tmpBytes: number;
  shmBytes: number;
  /** A GPU worker: the host's NVIDIA devices are bound in. */
  gpu?: boolean;
  /** An IPC channel to the process (a pre-booted runtime waits for its claim on it). */
  ipc?: boolean;
  /** Hold the worker before its exec until release() (its network is connected meanwhile). */
  hold?: boolean;
}

export interface SandboxedProcess {
  /** The bwrap process (its exit is the worker's: bwrap exits with its child's status). */
  child: ChildProcess;
  /** The worker's own host pid (signal this one, not bwrap), once bwrap has made it; undefined if it failed. */
  pid: Promise<number | undefined>;
  cgroup?: WorkerCgroup;
  /** Let a held worker run (hold). */
  release(): void;
}

export interface Sandbox {
  kind: "bwrap";
  description: string;
  /** Whether limits are enforced (cgroups could be made). */
  cgroups?: Cgroups;
  defaults: SandboxDefaults;
  /** The host's NVIDIA device nodes, bound into GPU workers' sandboxes. */
  gpuDevices: string[];
  /**
   * Workers' network: a namespace of their own that `attach` connects with pasta (only the job API's port of the
   * host's loopback reachable), or the host's, and why.
   */
  network:
    | { kind: "pasta"; attach(pid: number, hostPorts: readonly number[], inbound?: readonly number[]): Promise<AttachedNetwork> }
    | { kind: "host"; why: string };
  spawn(launch: SandboxLaunch): SandboxedProcess;
  /** Remove what the sandbox keeps on disk (its passwd and group files). */
  dispose(): void;
}

// The bwrap process's file descriptors: what it is told in --args, what the spawn gives it. bwrap closes 3..5
// before the worker runs; 6 is the pool's channel. (An fd passed and not named to bwrap would reach the worker.)
const FD_ARGS = 3;
const FD_INFO = 4;
const FD_SECCOMP = 5;
const FD_IPC = 6;
const FD_BLOCK = 7;

/**
 * Joins the cgroup directories it is given (this shell's pid into each cgroup.procs) and execs the rest: bwrap
 * starts inside the worker's cgroup, so the sandboxed process is limited from its first instruction, and nothing
 * waits half-started for the service (which may die meanwhile).
 */
const JOIN_CGROUP = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"';

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(delimiter)) {
    const file = join(dir, name);
    if (existsSync(file)) return file;
  }
  return undefined;
}

/** What the host's root has: each system directory as a link, a directory, or nothing. */
function hostSystem(): Parameters<typeof systemMounts>[0] {
  const dirs: Record<string, { link: string } | "dir" | "missing"> = {};
  for (const name of SYSTEM_DIRS) {
    try {
      const stat = lstatSync(`/${name}`);
      dirs[name] = stat.isSymbolicLink() ? { link: readlinkSync(`/${name}`) } : stat.isDirectory() ? "dir" : "missing";
    } catch {
      dirs[name] = "missing";
    }
  }
  return { dirs, etcFiles: ETC_FILES.filter((f) => existsSync(`/etc/${f}`)) };
}

/** The Node binary's own tree when it is not under /usr (nvm, a tarball in /opt): mounted where it is. */
function nodeMounts(nodePath: string): { binary: string; mounts: BindMount[] } {
  const binary = realpathSync(nodePath);
  if (binary.startsWith("/usr/")) return { binary, mounts: [] };
  // <prefix>/bin/node: the prefix holds its shared libraries and headers.
  const prefix = dirname(dirname(binary));
  return { binary, mounts: [{ source: prefix, dest: prefix }] };
}

/**
 * svc's runtime, read-only, where it is on the host (its stack traces and module resolution unchanged): the
 * package's dist/, package.json and node_modules (the real directory, when node_modules is a link, and the
 * packages it links to), the node_modules the package is installed in when it is, or for an entry outside a
 * package (tests' stand-ins) its directory.
 */
export function runtimeMounts(entry: string): BindMount[] {
  const real = realpathSync(entry);
  const dist = real.lastIndexOf(`/dist/`);
  if (dist < 0) return [{ source: dirname(real), dest: dirname(real) }];
  const root = real.slice(0, dist);
  const mounts: BindMount[] = [];
  // svc-cli installed in a project (`npm install -D svc-cli`): npm hoists its dependencies (the SDK among them)
  // into the node_modules that holds it, where Node looks next. Mounted first, so the mounts below land on top.
  const enclosing = root.lastIndexOf("/node_modules/");
  if (enclosing >= 0) {
    const modules = root.slice(0, enclosing + "/node_modules".length);
    mounts.push({ source: modules, dest: modules }, ...linkedPackageMounts(modules));
  }
  mounts.push({ source: `${root}/dist`, dest: `${root}/dist` }, { source: `${root}/package.json`, dest: `${root}/package.json`, optional: true });
  if (existsSync(`${root}/node_modules`)) {
    mounts.push({ source: realpathSync(`${root}/node_modules`), dest: `${root}/node_modules` });
    mounts.push(...linkedPackageMounts(`${root}/node_modules`));
  }
  return mounts;
}

/**
 * The packages a node_modules links to outside itself (npm workspaces: node_modules/svc -> ../packages/svc), each
 * mounted where the link points from inside the sandbox, so that the runtime's imports of them resolve.
 */
function linkedPackageMounts(modules: string): BindMount[] {
  const mounts: BindMount[] = [];
  const entries = (dir: string) => readdirSync(dir, { withFileTypes: true });
  for (const entry of entries(modules)) {
    const links =
      entry.name.startsWith("@") && entry.isDirectory()
        ? entries(join(modules, entry.name))
            .filter((e) => e.isSymbolicLink())
            .map((e) => join(modules, entry.name, e.name))
        : entry.isSymbolicLink()
          ? [join(modules, entry.name)]
          : [];
    for (const link of links) {
      if (!existsSync(link)) continue; // a dangling link: nothing to mount, and Node fails on it as on the host
      const dest = resolve(dirname(link), readlinkSync(link));
      if (dest.startsWith(`${modules}/`)) continue;
      mounts.push({ source: realpathSync(link), dest });
    }
  }
  return mounts;
}

/** The host's NVIDIA device nodes, for GPU workers. */
function gpuDevices(): string[] {
  try {
    return readdirSync("/dev")
      .filter((name) => name.startsWith("nvidia"))
      .map((name) => `/dev/${name}`);
  } catch {
    return [];
  }
}

/** Whether bwrap can make the namespaces the sandbox uses on this host (user namespaces may be disabled). */
function probeBwrap(bwrap: string): { ok: true } | { ok: false; why: string } {
  const system = systemMounts(hostSystem());
  const args = bwrapArgs({ ...system, writable: [], tmpBytes: 1 << 20, shmBytes: 1 << 20, env: {}, cwd: "/", fds: {} });
  const result = spawnSync(bwrap, [...args, "true"], { encoding: "utf8", timeout: 10_000 });
  if (result.error) return { ok: false, why: `${bwrap} could not run: ${result.error.message}` };
  if (result.status !== 0) return { ok: false, why: `${bwrap} cannot make the sandbox here: ${(result.stderr || `exit ${result.status}`).trim()}` };
  return { ok: true };
}

/**
 * Workers' network: a namespace of their own connected by pasta where pasta is installed and works here, else the
 * host's and why (said on the start line and by doctor).
 */
function workersNetwork(bwrap: string, system: Pick<BwrapSpec, "readOnly" | "symlinks">, options: SandboxOptions): Sandbox["network"] {
  if (options.network === "host") return { kind: "host", why: "network: host" };
  const pasta = options.pastaPath ?? findOnPath("pasta");
  if (!pasta) return { kind: "host", why: "pasta (Debian's passt) is not installed" };
  const args = bwrapArgs({ ...system, writable: [], tmpBytes: 1 << 20, shmBytes: 1 << 20, env: {}, cwd: "/", fds: {}, ownNetwork: true });
  const probe = probePasta(bwrap, args, pasta);
  if (!probe.ok) return { kind: "host", why: probe.why };
  return { kind: "pasta", attach: (pid, hostPorts, inbound) => attachNetwork(pasta, pid, hostPorts, tmpdir(), inbound) };
}

/** How the isolation in force is described (doctor, the server's start line). Pure. */
export function describeSandbox(parts: {
  seccomp: boolean;
  cgroups?: { version: 1 | 2; controllers: string[] };
  cgroupsUnavailable?: string;
  /** Why workers share the host's network (absent: a namespace of their own, through pasta). */
  network?: string;
}): string {
  const features = [
    parts.network === undefined ? "user/mount/pid/network namespaces" : "user/mount/pid namespaces",
    parts.seccomp ? "seccomp" : "no seccomp filter on this architecture",
  ];
  if (parts.cgroups) features.push(`cgroup v${parts.cgroups.version} limits (${parts.cgroups.controllers.join(", ")})`);
  else features.push(`no cgroup limits: ${parts.cgroupsUnavailable ?? "not available"}`);
  features.push(parts.network === undefined ? "outbound network through pasta" : `the host's network: ${parts.network}`);
  return `sandbox bwrap (${features.join(", ")})`;
}

/**
 * The sandbox the setting asks for on this host: bwrap when it works ("auto"), bwrap or an error ("bwrap"), or
 * none. Throws a UserError when "bwrap" is asked for and cannot be had.
 */
export function resolveSandbox(options: SandboxOptions): Sandbox | NoSandbox {
  if (options.setting === "none") return { kind: "none", reason: "sandbox: none", description: "no sandbox (sandbox: none)" };
  const unavailable = (why: string): NoSandbox => {
    if (options.setting === "bwrap")
      throw new UserError(`The sandbox for process workers is not available: ${why}`, {
        hint: "Install bubblewrap (apt-get install bubblewrap) on a kernel with user namespaces, or set SVC_SANDBOX=none (one user only).",
      });
    return { kind: "none", reason: why, description: `no sandbox (${why})` };
  };
  if (process.platform !== "linux") return unavailable(`bubblewrap needs Linux (this is ${process.platform})`);
  const bwrap = options.bwrapPath ?? findOnPath("bwrap");
  if (!bwrap) return unavailable("bubblewrap (bwrap) is not installed");
  const probe = probeBwrap(bwrap);
  if (!probe.ok) return unavailable(probe.why);
  return createBwrapSandbox(bwrap, options);
}

function createBwrapSandbox(bwrap: string, options: SandboxOptions): Sandbox {
  const defaults: SandboxDefaults = { ...DEFAULT_SANDBOX_DEFAULTS, ...options.defaults };
  const arch = options.noSeccomp ? undefined : seccompArch();
  const seccomp = arch ? encodeProgram(seccompProgram(arch)) : undefined;
  const detected = options.noCgroups ? { unavailable: "turned off" } : detectCgroups();
  const cgroups = "unavailable" in detected ? undefined : detected;
  cgroups?.sweep();
  const system = systemMounts(hostSystem());
  // The sandbox's /etc/passwd and /etc/group: its one user. Kept in a directory of this process's (0700), made at
  // the first sandboxed start: a sandbox only resolved (svc doctor, a driver that starts no worker) leaves none.
  let identityDir: string | undefined;
  const identityDirMade = (): string => {
    if (identityDir) return identityDir;
    const dir = mkdtempSync(join(tmpdir(), ownedTempPrefix("svc-sandbox")));
    const identity = identityFiles();
    writeFileSync(join(dir, "passwd"), identity.passwd, { mode: 0o644 });
    writeFileSync(join(dir, "group"), identity.group, { mode: 0o644 });
    return (identityDir = dir);
  };
  const devices = gpuDevices();
  const network = workersNetwork(bwrap, system, options);
  const description = describeSandbox({
    seccomp: seccomp !== undefined,
    cgroups,
    cgroupsUnavailable: "unavailable" in detected ? detected.unavailable : undefined,
    network: network.kind === "pasta" ? undefined : network.why,
  });

  return {
    kind: "bwrap",
    description,
    cgroups,
    defaults,
    gpuDevices: devices,
    network,
    spawn(launch) {
      const node = nodeMounts(launch.nodePath);
      const readOnly: BindMount[] = [
        ...system.readOnly,
        { source: join(identityDirMade(), "passwd"), dest: "/etc/passwd" },
        { source: join(identityDirMade(), "group"), dest: "/etc/group" },
        ...node.mounts,
        ...runtimeMounts(launch.entry),
        { source: launch.codeDir, dest: SANDBOX_CODE_DIR },
        ...(launch.modelsDir ? [{ source: launch.modelsDir, dest: SANDBOX_MODELS_DIR }] : []),
      ];
      const writable: BindMount[] = [];
      if (launch.volumeDir) writable.push({ source: launch.volumeDir, dest: SANDBOX_VOLUME_DIR });
      if (launch.runDir) writable.push({ source: launch.runDir, dest: SANDBOX_RUN_DIR });
      const env: Record<string, string> = { ...launch.env, HOME: SANDBOX_HOME };
      // Node finds its IPC channel by these: set by spawn on bwrap's environment, which the sandbox clears.
      if (launch.ipc) Object.assign(env, { NODE_CHANNEL_FD: String(FD_IPC), NODE_CHANNEL_SERIALIZATION_MODE: "json" });
      const cgroup = cgroups?.create(launch.name);
      const spec: BwrapSpec = {
        readOnly,
        writable,
        symlinks: system.symlinks,
        tmpBytes: launch.tmpBytes,
        shmBytes: launch.shmBytes,
        // Bound before /dev turns read-only.
        devices: launch.gpu ? devices : [],
        ownNetwork: network.kind === "pasta",
        env,
        cwd: SANDBOX_CODE_DIR,
        fds: { info: FD_INFO, seccomp: seccomp ? FD_SECCOMP : undefined, block: launch.hold ? FD_BLOCK : undefined },
      };
      const args = bwrapArgs(spec);
      const stdio: StdioOptions = [
        "ignore",
        "pipe",
        "pipe",
        "pipe",
        "pipe",
        seccomp ? "pipe" : "ignore",
        launch.ipc ? "ipc" : "ignore",
        ...(launch.hold ? (["pipe"] as const) : []),
      ];
      const command = [bwrap, "--args", String(FD_ARGS), "--", node.binary, realpathSync(launch.entry)];
      let child: ChildProcess;
      // A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group, as under `svc dev`) would
      // kill the wrapper but not the worker (its own session inside), which then outlived the service. The
      // service stops its workers itself, through their pids.
      const options = { stdio, env: {}, cwd: "/", detached: true };
      try {
        cgroup?.limit(launch.limits);
        child = cgroup ? spawn("/bin/sh", ["-c", JOIN_CGROUP, "sh", ...cgroup.dirs, "--", ...command], options) : spawn(command[0]!, command.slice(1), options);
      } catch (err) {
        void cgroup?.remove();
        throw err;
      }
      const pipe = (fd: number) => child.stdio[fd] as (Readable & Writable) | null;
      // A pipe bwrap closed early (it failed) must not become an unhandled error here; its exit says what happened.
      for (const fd of [FD_ARGS, FD_INFO, FD_SECCOMP, FD_BLOCK]) pipe(fd)?.on("error", () => undefined);
      pipe(FD_ARGS)?.end(encodeArgs(args));
      if (seccomp) pipe(FD_SECCOMP)?.end(seccomp);
      const pid = new Promise<number | undefined>((resolve) => {
        let info = "";
        const info$ = pipe(FD_INFO)!;
        // Read to its end: bwrap writes the rest of its report after the pid, and a closed pipe would kill it (SIGPIPE).
        const done = (value: number | undefined) => resolve(value);
        info$.on("data", (chunk: Buffer) => {
          info += chunk.toString();
          const m = /"child-pid"\s*:\s*(\d+)/.exec(info);
          if (m) done(Number(m[1]));
        });
        info$.once("end", () => done(undefined));
        child.once("exit", () => done(undefined));
      });
      child.once("exit", () => void cgroup?.remove());
      // bwrap runs the worker once it reads from the block fd.
      const release = () => (launch.hold ? pipe(FD_BLOCK)?.end("1") : undefined);
      return { child, pid, cgroup, release };
    },
    dispose() {
      if (identityDir) rmSync(identityDir, { recursive: true, force: true });
      identityDir = undefined;
    },
  };
}

/** A load-balanced worker's socket: in its run directory on the host, at /svc/run inside its sandbox. */
export function runDirSocket(runDir: string): { host: string; inside: string } {
  return { host: join(runDir, "lb.sock"), inside: `${SANDBOX_RUN_DIR}/lb.sock` };
}

/**
 * The first directory on the way to `path` that a sandboxed worker's mounts cannot pass, or undefined. The
 * sandbox's user namespace maps this process's user and group alone: a directory of another owner must let others
 * search it (o+x), or its group do so where the group is this process's, whatever root may do outside the
 * sandbox. A directory that does not exist yet is made by the service, as its own. `statOf` answers undefined
 * for a path that does not exist. Pure.
 */
export function sandboxBlockedAt(
  path: string,
  self: { uid: number; gid: number },
  statOf: (p: string) => { uid: number; gid: number; mode: number } | undefined,
): string | undefined {
  let dir = "/";
  for (const part of ["", ...resolve(path).split("/").filter(Boolean)]) {
    dir = part ? join(dir, part) : "/";
    const st = statOf(dir);
    if (!st) return undefined;
    const passable = st.uid === self.uid || (st.mode & 0o001) !== 0 || (st.gid === self.gid && (st.mode & 0o010) !== 0);
    if (!passable) return dir;
  }
  return undefined;
}

/**
 * Refuse a directory the sandboxed workers' mounts come from (the data directory's artifact cache, volumes,
 * models) when a directory on its way blocks them: every worker would fail with bwrap's "Can't find source path".
 */
export function checkSandboxReach(path: string): void {
  if (typeof process.getuid !== "function" || typeof process.getgid !== "function") return;
  const blocked = sandboxBlockedAt(path, { uid: process.getuid(), gid: process.getgid() }, (p) => {
    try {
      const st = statSync(p);
      return { uid: st.uid, gid: st.gid, mode: st.mode };
    } catch {
      return undefined;
    }
  });
  if (blocked === undefined) return;
  throw new UserError(`Sandboxed workers cannot reach ${path}: ${blocked} belongs to another user and does not let others search it`, {
    hint: `Let them pass (chmod o+x ${blocked}), or keep the data elsewhere (--data-dir), or run workers without a sandbox (--sandbox none, one tenant).`,
  });
}
