// The bubblewrap command line of a sandboxed worker, from a spec: which namespaces, what is mounted where, the
// environment. Pure: what the host has (which system directories are links) is read by the caller (layout.ts).
//
// Everything but the command goes through `--args FD` rather than the command line: a worker's environment holds
// its secrets and tokens, and any local user can read a process's command line.

/** Where a worker's own things are inside its sandbox: fixed paths, whatever the host's layout. */
export const SANDBOX_CODE_DIR = "/svc/code";
export const SANDBOX_VOLUME_DIR = "/svc/volume";
/** The host's model cache, read-only (docs/models.md). */
export const SANDBOX_MODELS_DIR = "/svc/models";
/** A per-worker directory the service and that worker share: a load-balanced worker's Unix socket is made there. */
export const SANDBOX_RUN_DIR = "/svc/run";
export const SANDBOX_HOME = "/tmp";
/** The uid and gid the worker has inside: not root, whatever the service runs as. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;

export interface BindMount {
  source: string;
  dest: string;
  /** Skip it when the source does not exist (optional system files). */
  optional?: boolean;
}

export interface BwrapSpec {
  /** Mounted read-only: system directories, the Node binary's tree, svc's runtime, the worker's code. */
  readOnly: BindMount[];
  /** Mounted read-write: the worker's volume, its run directory. */
  writable: BindMount[];
  /** Symbolic links made in the sandbox's root (merged-/usr systems: /bin -> usr/bin...). */
  symlinks: Array<{ target: string; path: string }>;
  /** Size of the private /tmp (bytes). */
  tmpBytes: number;
  /** Size of /dev/shm (bytes): POSIX shared memory, Python's multiprocessing, PyTorch's DataLoader. */
  shmBytes: number;
  /** Host devices bound into /dev (a GPU worker's). */
  devices?: readonly string[];
  /** A network namespace of its own (only loopback until pasta connects it, pasta.ts); else the host's. */
  ownNetwork?: boolean;
  /** The worker's whole environment (nothing else reaches it). */
  env: Record<string, string>;
  cwd: string;
  /** File descriptors of the bwrap process: the seccomp program, where it writes the child's pid, what it waits on. */
  fds: { seccomp?: number; info?: number; block?: number };
  hostname?: string;
}

/** The arguments of `bwrap --args FD`, NUL-separated, without the command. Pure. */
export function bwrapArgs(spec: BwrapSpec): string[] {
  const args: string[] = [
    // Its own user (not root inside), mounts, pids, System V IPC and hostname; the network is the host's: handlers
    // fetch models and call APIs.
    "--unshare-user",
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_GID),
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    ...(spec.ownNetwork ? ["--unshare-net"] : []),
    "--hostname",
    spec.hostname ?? "svc-worker",
    // The worker is pid 1 of its namespace and its host pid is the one --info-fd reports: SIGTERM from the
    // service reaches the runtime's own handler (a graceful drain), and when it exits every process it left
    // in the namespace goes with it.
    "--as-pid-1",
    // No controlling terminal to push input into (TIOCSTI).
    "--new-session",
  ];
  // The fresh file systems first: a bind below /tmp (a test's stand-in runtime) stays visible over the tmpfs.
  // bwrap's root and its /dev are tmpfs mounts without a size (half the host's memory): both end read-only
  // (below), so what a worker can write in memory is /tmp and /dev/shm, each of a bounded size.
  args.push("--proc", "/proc", "--dev", "/dev");
  for (const device of spec.devices ?? []) args.push("--dev-bind-try", device, device);
  args.push("--size", String(spec.shmBytes), "--tmpfs", "/dev/shm", "--size", String(spec.tmpBytes), "--tmpfs", "/tmp");
  for (const mount of spec.readOnly) args.push(mount.optional ? "--ro-bind-try" : "--ro-bind", mount.source, mount.dest);
  for (const link of spec.symlinks) args.push("--symlink", link.target, link.path);
  for (const mount of spec.writable) args.push(mount.optional ? "--bind-try" : "--bind", mount.source, mount.dest);
  args.push("--remount-ro", "/dev", "--remount-ro", "/");
  args.push("--chdir", spec.cwd, "--clearenv");
  for (const [key, value] of Object.entries(spec.env)) args.push("--setenv", key, value);
  if (spec.fds.info !== undefined) args.push("--info-fd", String(spec.fds.info));
  if (spec.fds.block !== undefined) args.push("--block-fd", String(spec.fds.block));
  if (spec.fds.seccomp !== undefined) args.push("--seccomp", String(spec.fds.seccomp));
  return args;
}

/** The bytes of the --args fd. Refuses a NUL inside an argument (it would split it). Pure. */
export function encodeArgs(args: string[]): Buffer {
  for (const arg of args) if (arg.includes("\0")) throw new Error("a sandbox argument contains a NUL byte");
  return Buffer.from(args.map((a) => `${a}\0`).join(""));
}

/** The /etc files a worker needs (name resolution, TLS roots, time zone), not the rest of /etc. */
export const ETC_FILES: readonly string[] = [
  "resolv.conf",
  "hosts",
  "host.conf",
  "nsswitch.conf",
  "gai.conf",
  "services",
  "protocols",
  "localtime",
  "ssl/certs",
  "ssl/openssl.cnf",
  "ca-certificates",
  "ca-certificates.conf",
  "pki/tls/certs",
];

/** The top-level system directories that may be links into /usr (merged /usr) or directories of their own. */
export const SYSTEM_DIRS: readonly string[] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/**
 * The system part of the mount view, from what the host has: /usr read-only, each of SYSTEM_DIRS as the link it
 * is or a read-only directory, and the /etc files that exist. Pure.
 */
export function systemMounts(host: {
  dirs: Record<string, { link: string } | "dir" | "missing">;
  etcFiles: readonly string[];
}): Pick<BwrapSpec, "readOnly" | "symlinks"> {
  const readOnly: BindMount[] = [{ source: "/usr", dest: "/usr" }];
  const symlinks: BwrapSpec["symlinks"] = [];
  for (const name of SYSTEM_DIRS) {
    const kind = host.dirs[name] ?? "missing";
    if (kind === "missing") continue;
    if (kind === "dir") readOnly.push({ source: `/${name}`, dest: `/${name}` });
    else symlinks.push({ target: kind.link, path: `/${name}` });
  }
  for (const file of host.etcFiles) readOnly.push({ source: `/etc/${file}`, dest: `/etc/${file}`, optional: true });
  return { readOnly, symlinks };
}

/** /etc/passwd and /etc/group of the sandbox: its one user, so that tools asking "who am I" get an answer. */
export function identityFiles(): { passwd: string; group: string } {
  return {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\nsvc:x:${SANDBOX_UID}:${SANDBOX_GID}:svc worker:${SANDBOX_HOME}:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\nsvc:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`,
  };
}
