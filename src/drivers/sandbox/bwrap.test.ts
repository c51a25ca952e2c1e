import { describe, expect, it } from "vitest";
import { bwrapArgs, encodeArgs, ETC_FILES, systemMounts, type BwrapSpec } from "./bwrap.js";
import { sandboxBlockedAt } from "./index.js";

const merged = systemMounts({
  dirs: { bin: { link: "usr/bin" }, sbin: { link: "usr/sbin" }, lib: { link: "usr/lib" }, lib64: { link: "usr/lib64" }, lib32: "missing", libx32: "missing" },
  etcFiles: ["resolv.conf", "hosts", "ssl/certs"],
});

function spec(extra: Partial<BwrapSpec> = {}): BwrapSpec {
  return {
    ...merged,
    readOnly: [...merged.readOnly, { source: "/data/artifact-cache/abc", dest: "/svc/code" }],
    writable: [{ source: "/data/volumes/v1", dest: "/svc/volume" }],
    tmpBytes: 64 << 20,
    shmBytes: 8 << 20,
    env: { PATH: "/usr/bin", SVC_WORKER_TOKEN: "svcw_secret" },
    cwd: "/svc/code",
    fds: { info: 4, block: 5, seccomp: 6 },
    ...extra,
  };
}

/** The value following `flag` each time it occurs. */
const after = (args: string[], flag: string, n = 1) => args.flatMap((a, i) => (a === flag ? [args.slice(i + 1, i + 1 + n).join(" ")] : []));

describe("bwrapArgs", () => {
  const args = bwrapArgs(spec());

  it("gives the worker its own user (not root), mount, pid, IPC and UTS namespaces, the host's network", () => {
    for (const flag of ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns", "--new-session", "--as-pid-1"])
      expect(args).toContain(flag);
    expect(after(args, "--uid")).toEqual(["1000"]);
    expect(after(args, "--gid")).toEqual(["1000"]);
    expect(args).not.toContain("--unshare-net");
    expect(args).not.toContain("--unshare-all");
    // Adoption after a service restart needs the worker to outlive a killed service.
    expect(args).not.toContain("--die-with-parent");
  });

  it("mounts the system read-only, only the /etc files named, the code read-only and the volume read-write", () => {
    expect(after(args, "--ro-bind", 2)).toEqual(["/usr /usr", "/data/artifact-cache/abc /svc/code"]);
    expect(after(args, "--ro-bind-try", 2)).toEqual(["/etc/resolv.conf /etc/resolv.conf", "/etc/hosts /etc/hosts", "/etc/ssl/certs /etc/ssl/certs"]);
    expect(after(args, "--symlink", 2)).toEqual(["usr/bin /bin", "usr/sbin /sbin", "usr/lib /lib", "usr/lib64 /lib64"]);
    expect(after(args, "--bind", 2)).toEqual(["/data/volumes/v1 /svc/volume"]);
    expect(args.join(" ")).not.toMatch(/--ro-bind \/etc \/etc|--bind \/ \//);
    expect(ETC_FILES).not.toContain("shadow");
  });

  it("makes a fresh /proc, a minimal /dev, a /dev/shm and a private /tmp of the given sizes, before the binds", () => {
    expect(after(args, "--proc")).toEqual(["/proc"]);
    expect(after(args, "--dev")).toEqual(["/dev"]);
    expect(after(args, "--size", 3)).toEqual([`${8 << 20} --tmpfs /dev/shm`, `${64 << 20} --tmpfs /tmp`]);
    expect(args.indexOf("--tmpfs")).toBeLessThan(args.indexOf("--ro-bind"));
  });

  it("leaves the root and /dev (tmpfs mounts without a size) read-only, after every mount, GPU devices bound before", () => {
    expect(after(args, "--remount-ro")).toEqual(["/dev", "/"]);
    const last = Math.max(...["--ro-bind", "--ro-bind-try", "--bind", "--symlink", "--tmpfs"].map((f) => args.lastIndexOf(f)));
    expect(args.indexOf("--remount-ro")).toBeGreaterThan(last);
    const gpu = bwrapArgs(spec({ devices: ["/dev/nvidia0", "/dev/nvidiactl"] }));
    expect(after(gpu, "--dev-bind-try", 2)).toEqual(["/dev/nvidia0 /dev/nvidia0", "/dev/nvidiactl /dev/nvidiactl"]);
    expect(gpu.indexOf("--dev-bind-try")).toBeLessThan(gpu.indexOf("--remount-ro"));
  });

  it("gives the worker a network namespace of its own when asked (pasta connects it), else the host's", () => {
    expect(bwrapArgs(spec({ ownNetwork: true }))).toContain("--unshare-net");
    expect(args).not.toContain("--unshare-net");
  });

  it("clears the environment and sets exactly the worker's, after --clearenv", () => {
    expect(after(args, "--setenv", 2)).toEqual(["PATH /usr/bin", "SVC_WORKER_TOKEN svcw_secret"]);
    expect(args.indexOf("--clearenv")).toBeLessThan(args.indexOf("--setenv"));
    expect(after(args, "--chdir")).toEqual(["/svc/code"]);
  });

  it("names its fds: the pid report, the cgroup wait, the seccomp program; none when not used", () => {
    expect(after(args, "--info-fd")).toEqual(["4"]);
    expect(after(args, "--block-fd")).toEqual(["5"]);
    expect(after(args, "--seccomp")).toEqual(["6"]);
    const bare = bwrapArgs(spec({ fds: {} }));
    for (const flag of ["--info-fd", "--block-fd", "--seccomp"]) expect(bare).not.toContain(flag);
  });

  it("binds the system directories that are directories, not links", () => {
    const split = systemMounts({ dirs: { bin: "dir", lib: "dir", lib64: "missing" }, etcFiles: [] });
    expect(split.readOnly.map((m) => m.dest)).toEqual(["/usr", "/bin", "/lib"]);
    expect(split.symlinks).toEqual([]);
  });

  it("encodes the arguments NUL-separated and refuses a NUL inside one", () => {
    expect(encodeArgs(["--a", "b c"]).toString()).toBe("--a\0b c\0");
    expect(() => encodeArgs(["x\0y"])).toThrow(/NUL/);
  });
});

describe("sandboxBlockedAt", () => {
  const self = { uid: 0, gid: 0 };
  const dirs: Record<string, { uid: number; gid: number; mode: number }> = {
    "/": { uid: 0, gid: 0, mode: 0o755 },
    "/home": { uid: 0, gid: 0, mode: 0o755 },
    "/home/bob": { uid: 1001, gid: 1001, mode: 0o700 },
    "/home/bob/data": { uid: 0, gid: 0, mode: 0o755 },
    "/srv": { uid: 1001, gid: 0, mode: 0o750 },
    "/srv/svc": { uid: 0, gid: 0, mode: 0o700 },
    "/opt": { uid: 1001, gid: 1001, mode: 0o701 },
  };
  const statOf = (p: string) => dirs[p];

  it("names the first directory of another owner that others may not search; its own, o+x, or its group's g+x pass", () => {
    expect(sandboxBlockedAt("/home/bob/data/artifact-cache", self, statOf)).toBe("/home/bob");
    expect(sandboxBlockedAt("/srv/svc/artifact-cache", self, statOf)).toBeUndefined();
    expect(sandboxBlockedAt("/opt/svc", self, statOf)).toBeUndefined();
    // Not made yet: the service makes it, as its own.
    expect(sandboxBlockedAt("/var/lib/svc", self, statOf)).toBeUndefined();
    expect(sandboxBlockedAt("/home/bob/data", { uid: 1001, gid: 1001 }, statOf)).toBeUndefined();
  });
});
