// Snapshots of initialised workers for the process driver (docs/cold-start.md, "Snapshots"). For an endpoint
// with `snapshot: true`, the first worker of a revision is preceded by a template: a runtime that initialises the
// handler and waits, which CRIU checkpoints into an image keyed by everything the image holds (revision,
// environment minus the worker's identity, artifact, Node, runtime). Every worker of that key is then restored
// from the image, each in its own PID namespace (so any number restore at once), and told its identity over a
// descriptor CRIU hands it at restore. Anything that fails falls back to a fresh start, with a notice.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SNAPSHOT_FD_ENV, SNAPSHOT_IDENTITY_KEYS, SNAPSHOT_READY, SNAPSHOT_READY_FD_ENV, type SnapshotIdentity } from "../runtime/snapshot.js";
import { checkpointProblem, criuLogReason, CRIU_STALL_MS, runCriu, stallWatch } from "./criu.js";
import type { WorkerLaunch } from "./types.js";
import { errorMessage } from "../errors.js";

export interface SnapshotOptions {
  /** Where images are kept: <dir>/<endpoint id>/<key>/ (default given by the process driver). */
  dir: string;
  /** The runtime entry and Node binary workers run (part of the key: an image holds both). */
  runtimeEntry: string;
  nodePath: string;
  /** The CRIU binary (default: `criu` on PATH). */
  criu?: string;
  /**
   * How long a template may take to initialise before it is given up (default 15 min): past it, the worker waiting
   * for it starts fresh instead of waiting on.
   */
  templateTimeoutMs?: number;
  /** Where notices go (default: process.emitWarning). */
  notice?: (text: string) => void;
  /** How long a dump or restore may make no progress before it is abandoned (default CRIU_STALL_MS). */
  stallMs?: number;
  /** Whether this host can checkpoint (default: checkpointProblem's dry run); tests replace it. */
  hostProbe?: () => Promise<string | undefined>;
}

/** A worker restored from an image: `child` is its `criu restore` (which exits with it), `pid` the worker's. */
export interface RestoredWorker {
  child: ChildProcess;
  pid: number;
}

/** Why snapshots cannot be used for `launch` on this host (undefined: they can). Pure but for `hostProblem`. */
export function snapshotRefusal(launch: Pick<WorkerLaunch, "computeType" | "image">, hostProblem: string | undefined): string | undefined {
  if (launch.image) return "a prebuilt image is not the svc runtime";
  if (launch.computeType === "GPU") return "GPU memory cannot be checkpointed by CRIU";
  return hostProblem;
}

/**
 * The image's key: what a restored worker has in memory. The worker's identity is not in it (handed at restore);
 * the revision alone is not enough (`svc update` may change variables without a new revision).
 */
export function snapshotKey(launch: Pick<WorkerLaunch, "endpointId" | "revision">, templateEnv: NodeJS.ProcessEnv, runtime: Record<string, unknown>): string {
  const env = Object.entries(templateEnv)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash("sha256")
    .update(JSON.stringify({ endpoint: launch.endpointId, revision: launch.revision ?? null, env, runtime }))
    .digest("hex")
    .slice(0, 32);
}

/** The worker's environment without its identity: what the template runs with. */
export function templateEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  for (const key of SNAPSHOT_IDENTITY_KEYS) delete out[key];
  // libuv's io_uring rings cannot be checkpointed; epoll can.
  out.UV_USE_IO_URING = "0";
  return out;
}

/** CRIU's --inherit-fd name of a file: its path without the leading slash. */
const inheritName = (path: string) => path.replace(/^\/+/, "");

export interface SnapshotStore {
  /**
   * A worker for `launch` restored from its revision's image (made first when there is none yet), or undefined when
   * it must start fresh (the reason said once). Never throws.
   */
  restore(launch: WorkerLaunch, env: NodeJS.ProcessEnv, cwd: string): Promise<RestoredWorker | undefined>;
  /** The ready images of an endpoint (one at most: its current revision's). */
  imageDirs(endpointId: string): string[];
  /** Kill the templates still initialising (the driver is closing, or its process exits). */
  killTemplates(): void;
  /** Why this host cannot checkpoint (undefined: it can), from its dry run (started by the first call). */
  hostProblem(): Promise<string | undefined>;
}

export function createSnapshotStore(options: SnapshotOptions): SnapshotStore {
  const criu = options.criu ?? "criu";
  const notice = options.notice ?? ((text: string) => process.emitWarning(text));
  const said = new Set<string>();
  const sayOnce = (key: string, text: string) => {
    if (said.has(key)) return;
    said.add(key);
    notice(text);
  };
  let hostChecked: Promise<string | undefined> | undefined;
  /** Why this host cannot checkpoint (undefined: it can): a real dry run, once per store. */
  const hostProblem = (): Promise<string | undefined> => (hostChecked ??= options.hostProbe ? options.hostProbe() : checkpointProblem({ criu }));
  const making = new Map<string, Promise<boolean>>();
  const templates = new Set<ChildProcess>();
  // An image holds the runtime's code as it was: a rebuilt or upgraded runtime (same path) needs a new one.
  const runtime = { entry: options.runtimeEntry, node: options.nodePath, nodeVersion: process.version, entryModified: modifiedMs(options.runtimeEntry) };

  /** Checkpoint a template of `launch` into `imageDir`; true when the image is ready. */
  const makeImage = async (launch: WorkerLaunch, env: NodeJS.ProcessEnv, cwd: string, imageDir: string): Promise<boolean> => {
    rmSync(imageDir, { recursive: true, force: true });
    mkdirSync(imageDir, { recursive: true, mode: 0o700 });
    // The store and each endpoint's directory too (made 0755 by earlier versions).
    for (const dir of [options.dir, dirname(imageDir)]) chmodSync(dir, 0o700);
    const fifo = join(imageDir, "identity.fifo");
    const mk = spawnSync("mkfifo", ["-m", "600", fifo], { encoding: "utf8" });
    if (mk.status !== 0) throw new Error(`mkfifo failed: ${mk.stderr || mk.error?.message}`);
    const out = openSync(join(imageDir, "init.out"), "w", 0o600);
    const err = openSync(join(imageDir, "init.err"), "w", 0o600);
    // Read-write: opening a FIFO for reading alone would wait for a writer.
    const identity = openSync(fifo, "r+");
    const templateEnv = { ...templateEnvironment(env), [SNAPSHOT_FD_ENV]: "3", [SNAPSHOT_READY_FD_ENV]: "4" };
    // Its own PID namespace (the runtime is PID 1 there): every restore gets a namespace of its own, so restored
    // workers never need the template's PID free. Its own session (setsid): CRIU restores it whole.
    const template = spawn("unshare", ["--pid", "--fork", "--kill-child", "setsid", options.nodePath, options.runtimeEntry], {
      cwd,
      env: templateEnv,
      stdio: ["ignore", out, err, identity, "pipe"],
      detached: true,
    });
    for (const fd of [out, err, identity]) closeSync(fd);
    templates.add(template);
    template.once("exit", () => templates.delete(template));
    const started = Date.now();
    const ready = await new Promise<boolean>((resolve) => {
      let said = "";
      template.stdio[4]!.on("data", (d: Buffer) => {
        said += d.toString();
        if (said.includes(SNAPSHOT_READY)) resolve(true);
      });
      template.once("exit", () => resolve(false));
      template.once("error", () => resolve(false));
      const timer = setTimeout(() => resolve(false), options.templateTimeoutMs ?? 15 * 60_000);
      timer.unref();
      template.once("exit", () => clearTimeout(timer));
    });
    // The init's output is this first worker's.
    const relay = () => {
      for (const [file, stream] of [
        ["init.out", "stdout"],
        ["init.err", "stderr"],
      ] as const) {
        const text = readFileSync(join(imageDir, file), "utf8");
        for (const line of text.split("\n").filter((l) => l.length > 0)) launch.onLog({ ts: Date.now(), stream, text: line });
      }
    };
    if (!ready) {
      relay();
      template.kill("SIGKILL");
      throw new Error(
        `the template did not finish its initialisation (${template.exitCode === null && template.signalCode === null ? "timed out" : `exited with code ${template.exitCode}`})`,
      );
    }
    const initMs = Date.now() - started;
    // The runtime is the forked child of `unshare`: PID 1 of the namespace.
    const runtimePid = Number(readFileSync(`/proc/${template.pid}/task/${template.pid}/children`, "utf8").trim().split(/\s+/)[0]);
    // Everything the initialisation wrote is in the files now (the runtime waits for its identity).
    relay();
    // Awaited, not run synchronously: a dump may take minutes, and the service answers meanwhile.
    // Verbose (-v4): the log's growth is how a dump that makes no progress is told from a long one.
    const dump = await runCriu(criu, ["dump", "--tree", String(runtimePid), "--images-dir", imageDir, "--log-file", "dump.log", "-v4"], {
      progress: [imageDir],
      stallMs: options.stallMs,
      timeoutMs: 300_000,
    });
    template.kill("SIGKILL");
    // The pages hold the initialised worker's memory (its secrets among it): the service's alone, whatever
    // modes CRIU wrote them with.
    privateTree(imageDir);
    if (dump.exitCode !== 0) {
      const why = dump.startError ?? criuLogReason(readIfExists(join(imageDir, "dump.log")));
      throw new Error(dump.abandoned ? `criu dump ${dump.abandoned} (${why}); abandoned` : `criu dump failed (${why})`);
    }
    writeFileSync(join(imageDir, "ready"), JSON.stringify({ endpointId: launch.endpointId, revision: launch.revision, initMs }), { mode: 0o600 });
    launch.onLog({ ts: Date.now(), stream: "log", text: `[svc] snapshot taken after initialisation (${initMs} ms): workers of this revision start from it` });
    return true;
  };

  const restoreFrom = async (launch: WorkerLaunch, env: NodeJS.ProcessEnv, imageDir: string): Promise<RestoredWorker> => {
    const runDir = join(options.dir, "run");
    mkdirSync(runDir, { recursive: true, mode: 0o700 });
    const work = mkdtempSync(join(runDir, `${launch.workerId}-`));
    const pidFile = join(work, "pid");
    const child = spawn(
      criu,
      [
        "restore",
        "--images-dir",
        imageDir,
        "--work-dir",
        work,
        "--log-file",
        "restore.log",
        "-v4",
        "--pidfile",
        pidFile,
        // The template's output files and identity FIFO become this restore's pipes.
        "--inherit-fd",
        `fd[1]:${inheritName(join(imageDir, "init.out"))}`,
        "--inherit-fd",
        `fd[2]:${inheritName(join(imageDir, "init.err"))}`,
        "--inherit-fd",
        `fd[3]:${inheritName(join(imageDir, "identity.fifo"))}`,
      ],
      { stdio: ["ignore", "pipe", "pipe", "pipe"] },
    );
    const identity: SnapshotIdentity = { env: {} };
    for (const key of SNAPSHOT_IDENTITY_KEYS) {
      const value = env[key];
      if (value) identity.env[key] = value;
    }
    const channel = child.stdio[3] as NodeJS.WritableStream;
    // A restore that fails closes its end unread (ECONNRESET): that failure is reported by criu's exit below.
    channel.on("error", () => undefined);
    channel.end(`${JSON.stringify(identity)}\n`);
    // The restored worker's PID (on this host): what stop() and kill() signal. Killing `criu restore` alone would
    // leave it running.
    // A restore that makes no progress (its verbose log stops growing) before the worker exists is abandoned.
    const stallMs = options.stallMs ?? CRIU_STALL_MS;
    const watch = stallWatch([work], stallMs);
    const pid = await new Promise<number>((resolve, reject) => {
      const timer = setInterval(() => {
        const text = readIfExists(pidFile).trim();
        if (text) {
          clearInterval(timer);
          resolve(Number(text));
          return;
        }
        if (watch.stalled()) {
          clearInterval(timer);
          const why = criuLogReason(readIfExists(join(work, "restore.log")));
          child.kill("SIGKILL");
          reject(new Error(`criu restore made no progress for ${Math.round(stallMs / 1000)} s (${why}); abandoned`));
        }
      }, 5);
      child.once("exit", (code) => {
        clearInterval(timer);
        const text = readIfExists(pidFile).trim();
        if (text) resolve(Number(text));
        else reject(new Error(`criu restore failed (code ${code}: ${criuLogReason(readIfExists(join(work, "restore.log")))})`));
      });
      child.once("error", (err) => {
        clearInterval(timer);
        reject(err);
      });
    });
    child.once("exit", () => rmSync(work, { recursive: true, force: true }));
    // CRIU writes the pidfile before it lets go of the restored threads (ptrace). A worker killed in between leaves
    // threads only CRIU may reap, which it never does (it waits for the process, not its threads), and
    // `criu restore` then never exits: the worker is handed over once no thread of it is traced any more.
    const deadline = Date.now() + 10_000;
    while (stillTraced(pid) && Date.now() < deadline && child.exitCode === null) await new Promise((resolve) => setTimeout(resolve, 2));
    return { child, pid };
  };

  return {
    async restore(launch, env, cwd) {
      const launchRefusal = snapshotRefusal(launch, undefined);
      const refusal = launchRefusal ?? (await hostProblem());
      if (refusal) {
        sayOnce(
          launchRefusal ? `${launch.endpointId}:${refusal}` : "host",
          `svc: snapshots are off for endpoint ${launch.endpointName}: ${refusal}; its workers start without one`,
        );
        // Once per endpoint where its owner looks too: the endpoint's logs.
        if (!said.has(`log:${launch.endpointId}`)) {
          said.add(`log:${launch.endpointId}`);
          launch.onLog({ ts: Date.now(), stream: "log", text: `[svc] snapshots are off: ${refusal}; workers start without one` });
        }
        return undefined;
      }
      const key = snapshotKey(launch, templateEnvironment(env), runtime);
      const endpointDir = join(options.dir, launch.endpointId);
      const imageDir = join(endpointDir, key);
      try {
        if (!existsSync(join(imageDir, "ready"))) {
          let pending = making.get(imageDir);
          if (!pending) {
            // A new revision's image replaces the endpoint's older ones: none of them is restored again.
            if (existsSync(endpointDir))
              for (const old of readdirSync(endpointDir)) if (old !== key) rmSync(join(endpointDir, old), { recursive: true, force: true });
            pending = makeImage(launch, env, cwd, imageDir);
            making.set(imageDir, pending);
            // A failed template stays recorded: this revision's workers start fresh instead of trying again each time.
            void pending.then(
              () => making.delete(imageDir),
              () => undefined,
            );
          }
          await pending;
        }
        try {
          return await restoreFrom(launch, env, imageDir);
        } catch (err) {
          // An image this host cannot restore (another kernel since it was taken, a damaged file): not used again.
          rmSync(imageDir, { recursive: true, force: true });
          const failed = Promise.reject(err);
          failed.catch(() => undefined /* thrown below; kept only so later starts skip this image */);
          making.set(imageDir, failed);
          throw err;
        }
      } catch (err) {
        sayOnce(`${imageDir}:failed`, `svc: snapshot of endpoint ${launch.endpointName} not used (${errorMessage(err)}); its workers start without one`);
        launch.onLog({ ts: Date.now(), stream: "log", text: `[svc] snapshot not used: ${errorMessage(err)}; starting without it` });
        return undefined;
      }
    },
    killTemplates() {
      for (const template of templates) template.kill("SIGKILL");
    },
    hostProblem,
    imageDirs(endpointId) {
      const endpointDir = join(options.dir, endpointId);
      if (!existsSync(endpointDir)) return [];
      return readdirSync(endpointDir)
        .filter((k) => existsSync(join(endpointDir, k, "ready")))
        .map((k) => join(endpointDir, k));
    },
  };
}

/** Make every file under `dir` 0600 and every directory 0700 (the snapshot images CRIU wrote). */
export function privateTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      chmodSync(path, 0o700);
      privateTree(path);
    } else if (entry.isFile()) chmodSync(path, 0o600);
  }
  chmodSync(dir, 0o700);
}

/** Whether a thread of `pid` is still traced (by CRIU finishing a restore). Linux /proc. */
function stillTraced(pid: number): boolean {
  let threads: string[];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return threads.some((tid) => /^TracerPid:\s*[1-9]/m.test(readIfExists(`/proc/${pid}/task/${tid}/status`)));
}

function modifiedMs(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

function readIfExists(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}
