// A worker image built for the provider, made from this machine's files (nothing can be pulled here): the
// host's python3 binary, the shared libraries it and its extension modules link (ldd), its standard library,
// a non-root user, and the standard-library provider worker (fixtures/provider-worker/provider-worker.py),
// streamed into `docker import` with Cmd set. What an image built for the provider looks like to svc: an entry
// point that reads the RUNPOD_* variables and speaks the provider's protocol.

import { execFileSync } from "node:child_process";
import { createReadStream, existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pipeline } from "node:stream/promises";
import type Docker from "dockerode";
import tarStream from "tar-stream";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { parseLdd } from "../../src/drivers/image-inputs.js";
import { asError } from "../../src/errors.js";

export const PROVIDER_WORKER_SCRIPT = fileURLToPath(new URL("../../fixtures/provider-worker/provider-worker.py", import.meta.url));
/** The image's user: not root, and the uid svc's own workers run as (a network volume's directory is theirs). */
const USER = { name: "worker", uid: 1000, gid: 1000, home: "/home/worker" };
/** Parts of the standard library the worker never imports: left out to keep the image small. */
const SKIPPED_STDLIB = new Set([
  "test",
  "idlelib",
  "tkinter",
  "turtledemo",
  "ensurepip",
  "lib2to3",
  "pydoc_data",
  "__pycache__",
  "distutils",
  "site-packages",
  "dist-packages",
]);

/** The host's system Python (a real binary, not a shim) and its standard library directory. */
function hostPython(): { binary: string; stdlib: string } {
  for (const candidate of ["/usr/bin/python3", "/usr/local/bin/python3"]) {
    if (!existsSync(candidate)) continue;
    const binary = realpathSync(candidate);
    const stdlib = execFileSync(binary, ["-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"], { encoding: "utf8" }).trim();
    return { binary, stdlib };
  }
  throw new Error("no python3 binary on this machine (/usr/bin/python3) to build the provider worker's test image from");
}

interface Entry {
  path: string;
  /** A host file to copy, or the content itself. */
  source?: string;
  content?: string;
  mode: number;
  type: "file" | "directory";
  uid?: number;
  gid?: number;
}

/** The shared libraries a binary or extension module links, as `ldd` lists them. */
function libraries(binary: string): string[] {
  return parseLdd(execFileSync("ldd", [binary], { encoding: "utf8" }));
}

/** Every file of the image: the interpreter, its libraries, the standard library, /etc, the worker. */
function imageEntries(): Entry[] {
  const { binary, stdlib } = hostPython();
  const entries = new Map<string, Entry>();
  const addFile = (path: string, source: string) => {
    const real = realpathSync(source);
    entries.set(path, { path, source: real, mode: statSync(real).mode & 0o777, type: "file" });
  };
  addFile("/usr/bin/python3", binary);
  const libs = new Set(libraries(binary));
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      if (SKIPPED_STDLIB.has(name)) continue;
      const path = join(dir, name);
      const info = lstatSync(path);
      if (info.isSymbolicLink() && !existsSync(path)) continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".py") || name.endsWith(".so")) {
        if (name.includes("_test") || name.startsWith("xx")) continue;
        addFile(path, path);
        if (name.endsWith(".so")) for (const lib of libraries(path)) libs.add(lib);
      }
    }
  };
  walk(stdlib);
  // Name resolution (the service's host alias in /etc/hosts) loads these with dlopen: ldd does not list them.
  const libc = [...libs].find((p) => p.endsWith("/libc.so.6"));
  if (libc)
    for (const extra of ["libnss_files.so.2", "libnss_dns.so.2", "libresolv.so.2"])
      if (existsSync(join(dirname(libc), extra))) libs.add(join(dirname(libc), extra));
  for (const lib of libs) addFile(lib, lib);
  const text = (path: string, content: string, mode = 0o644) => entries.set(path, { path, content, mode, type: "file" });
  text("/etc/passwd", `root:x:0:0:root:/root:/sbin/nologin\n${USER.name}:x:${USER.uid}:${USER.gid}::${USER.home}:/sbin/nologin\n`);
  text("/etc/group", `root:x:0:\n${USER.name}:x:${USER.gid}:\n`);
  text("/etc/nsswitch.conf", "hosts: files dns\n");
  text("/worker/provider-worker.py", readFileSync(PROVIDER_WORKER_SCRIPT, "utf8"), 0o755);
  // Directories: every parent, plus /tmp and the user's home.
  const dirs = new Map<string, Entry>();
  for (const path of entries.keys()) for (let d = dirname(path); d !== "/"; d = dirname(d)) dirs.set(d, { path: d, mode: 0o755, type: "directory" });
  dirs.set("/tmp", { path: "/tmp", mode: 0o1777, type: "directory" });
  dirs.set(USER.home, { path: USER.home, mode: 0o755, type: "directory", uid: USER.uid, gid: USER.gid });
  for (const d of ["/home", "/proc", "/sys", "/dev", "/etc"]) if (!dirs.has(d)) dirs.set(d, { path: d, mode: 0o755, type: "directory" });
  return [...[...dirs.values()].sort((a, b) => a.path.localeCompare(b.path)), ...[...entries.values()].sort((a, b) => a.path.localeCompare(b.path))];
}

function tarOf(entries: Entry[]): NodeJS.ReadableStream {
  const pack = tarStream.pack();
  void (async () => {
    for (const e of entries) {
      const header = { name: e.path.slice(1), mode: e.mode, uid: e.uid ?? 0, gid: e.gid ?? 0 };
      if (e.type === "directory") pack.entry({ ...header, type: "directory" });
      else if (e.content !== undefined) pack.entry({ ...header, type: "file" }, e.content);
      else await pipeline(createReadStream(e.source!), pack.entry({ ...header, type: "file", size: statSync(e.source!).size }));
    }
    pack.finalize();
  })().catch((err: unknown) => pack.destroy(asError(err)));
  return pack as unknown as NodeJS.ReadableStream;
}

/**
 * Build the provider worker's image as `tag` (labelled svc.managed and `session`, so a crashed run's cleanup finds
 * it): the standard-library worker as its Cmd, run by a non-root user.
 */
export async function buildProviderWorkerImage(docker: Docker, tag: string, session: string): Promise<void> {
  const at = tag.lastIndexOf(":");
  const changes = [
    `CMD ["/usr/bin/python3", "-u", "/worker/provider-worker.py"]`,
    "ENV PATH=/usr/bin:/bin",
    "ENV PYTHONDONTWRITEBYTECODE=1",
    `ENV HOME=${USER.home}`,
    `WORKDIR ${USER.home}`,
    `USER ${USER.uid}:${USER.gid}`,
    `LABEL ${LABELS.managed}=true`,
    `LABEL ${LABELS.session}=${session}`,
  ];
  const progress = await docker.importImage(tarOf(imageEntries()), { repo: tag.slice(0, at), tag: tag.slice(at + 1), changes });
  const messages = await new Promise<Array<{ error?: string }>>((resolve, reject) =>
    docker.modem.followProgress(progress, (err, out) => (err ? reject(err) : resolve(out))),
  );
  const failed = messages.find((m) => m.error);
  if (failed) throw new Error(`the provider worker's test image could not be imported: ${failed.error}`);
}
