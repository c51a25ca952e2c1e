// Running CRIU so that it can never hold a worker back: every `criu dump` and `criu restore` svc runs is watched for
// progress (its verbose log and the images it writes), and one that makes none for a few seconds is killed; and
// whether this host can checkpoint at all is decided by a real dry run (a tiny process dumped and restored), not by
// `criu check` alone, which passes on hosts where a dump then waits forever (a process without CAP_SYS_RESOURCE,
// for one). docs/cold-start.md, "What checkpoints need".

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ownedTempPrefix } from "./owned-temp.js";

/**
 * How long a dump or restore may go without writing a line of its log (at -v4) or a byte of its images before it is
 * abandoned. A dump or restore that works writes log lines every few milliseconds (thousands of lines a second at
 * -v4) and streams its pages into the images as it goes; one that hangs stops both at once.
 */
export const CRIU_STALL_MS = 5_000;

/** The dry run's bounds: a `sleep` dumped and restored takes well under a second where CRIU works. */
export const PROBE_STALL_MS = 3_000;
export const PROBE_TIMEOUT_MS = 8_000;

export interface WatchedRun {
  /** CRIU's exit code (undefined when it was killed or could not start). */
  exitCode?: number;
  /** Why it did not finish: it made no progress for the stall bound, or passed its overall bound. */
  abandoned?: string;
  /** Could not be started (not installed). */
  startError?: string;
}

export interface WatchOptions {
  /** Files and directories whose growth counts as progress (the log file, the images directory). */
  progress: string[];
  stallMs?: number;
  /** An overall bound, however much progress it makes (default none). */
  timeoutMs?: number;
}

/** The total size of the files at `paths` (directories summed one level deep: CRIU's images are flat). */
export function progressSize(paths: string[]): number {
  let total = 0;
  for (const path of paths) {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      continue;
    }
    if (!stat.isDirectory()) {
      total += stat.size;
      continue;
    }
    for (const name of readdirSync(path)) {
      try {
        total += statSync(join(path, name)).size;
      } catch {
        // removed between the listing and the stat: counts as nothing
      }
    }
  }
  return total;
}

/**
 * Whether what CRIU writes under `paths` has stopped growing for `stallMs`: call `stalled()` as often as wanted; the
 * first call starts the clock.
 */
export function stallWatch(paths: string[], stallMs: number): { stalled(): boolean } {
  let last = -1;
  let lastChange = Date.now();
  return {
    stalled() {
      const size = progressSize(paths);
      const now = Date.now();
      if (size !== last) {
        last = size;
        lastChange = now;
      }
      return now - lastChange >= stallMs;
    },
  };
}

/**
 * Watch a running CRIU `child` until it exits or makes no progress for `stallMs` (then it is killed). Resolves,
 * never rejects.
 */
export function watchCriu(child: ChildProcess, options: WatchOptions): Promise<WatchedRun> {
  const stallMs = options.stallMs ?? CRIU_STALL_MS;
  return new Promise((resolve) => {
    const watch = stallWatch(options.progress, stallMs);
    const started = Date.now();
    let abandoned: string | undefined;
    const timer = setInterval(
      () => {
        const now = Date.now();
        if (watch.stalled()) abandoned = `made no progress for ${Math.round(stallMs / 1000)} s`;
        else if (options.timeoutMs !== undefined && now - started >= options.timeoutMs)
          abandoned = `did not finish in ${Math.round(options.timeoutMs / 1000)} s`;
        if (abandoned) {
          clearInterval(timer);
          child.kill("SIGKILL");
        }
      },
      Math.min(250, Math.max(20, stallMs / 10)),
    );
    child.once("error", (err) => {
      clearInterval(timer);
      resolve({ startError: err.message });
    });
    child.once("exit", (code) => {
      clearInterval(timer);
      resolve(abandoned ? { abandoned } : { exitCode: code ?? undefined });
    });
  });
}

/**
 * What a CRIU run leaves running until it ends: its own process, the dry run's subject (by process group) and
 * scratch directory. Ended when this process exits, however soon: a `criu dump` that hangs outlives its parent
 * otherwise, holding its subject stopped for good.
 */
const inFlight = { pids: new Set<number>(), groups: new Set<number>(), dirs: new Set<string>() };
let exitHookSet = false;

function holdUntilExit(what: { pid?: number; group?: number; dir?: string }): () => void {
  if (!exitHookSet) {
    exitHookSet = true;
    // "exit" handlers run synchronously: kill and remove, nothing asynchronous.
    process.once("exit", () => {
      for (const pid of inFlight.pids) killQuietly(pid);
      for (const group of inFlight.groups) killQuietly(-group);
      for (const dir of inFlight.dirs) rmSync(dir, { recursive: true, force: true });
    });
  }
  if (what.pid !== undefined) inFlight.pids.add(what.pid);
  if (what.group !== undefined) inFlight.groups.add(what.group);
  if (what.dir !== undefined) inFlight.dirs.add(what.dir);
  return () => {
    if (what.pid !== undefined) inFlight.pids.delete(what.pid);
    if (what.group !== undefined) inFlight.groups.delete(what.group);
    if (what.dir !== undefined) inFlight.dirs.delete(what.dir);
  };
}

/** Run `criu <args>` to its end under the progress watch (and never past this process's own end). */
export async function runCriu(criu: string, args: string[], options: WatchOptions & { cwd?: string }): Promise<WatchedRun> {
  const child = spawn(criu, args, { stdio: "ignore", cwd: options.cwd });
  const release = holdUntilExit({ pid: child.pid });
  try {
    return await watchCriu(child, options);
  } finally {
    release();
  }
}

/** The line of a CRIU log that says what went wrong (its last error), else its last line. Pure. */
export function criuLogReason(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const error = lines.filter((l) => /Error/.test(l)).pop();
  return (error ?? lines.pop() ?? "no output").slice(0, 300);
}

function readIfExists(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

export interface ProbeOptions {
  criu?: string;
  stallMs?: number;
  timeoutMs?: number;
}

/**
 * Why this host cannot checkpoint a process (undefined: it can): Linux, root, CRIU installed and `criu check`
 * passing, and then a real dry run: a `sleep` in a PID namespace of its own (as a template is) dumped and restored,
 * each step under the progress watch and the whole under `timeoutMs`. Never throws.
 */
export async function checkpointProblem(options: ProbeOptions = {}): Promise<string | undefined> {
  const criu = options.criu ?? "criu";
  if (process.platform !== "linux") return "CRIU runs on Linux only";
  if (typeof process.getuid === "function" && process.getuid() !== 0) return "CRIU needs root here";
  const deadline = Date.now() + (options.timeoutMs ?? PROBE_TIMEOUT_MS);
  const left = () => Math.max(1, deadline - Date.now());
  // Loaded here: `svc doctor`'s module is part of every command's tree (docs/design/0019).
  const { execa } = await import("execa");
  const check = await execa(criu, ["check"], { timeout: left(), reject: false, stdin: "ignore" });
  if (check.exitCode === undefined && !check.timedOut) return `${criu} is not installed (${check.code ?? check.shortMessage})`;
  if (check.exitCode !== 0)
    return `\`${criu} check\` fails on this host: ${check.timedOut ? "timed out" : criuLogReason(String(check.stderr || check.stdout))}`;

  // Named after this process: a service killed mid-probe leaves it to the next one's sweep (owned-temp.ts).
  const dir = mkdtempSync(join(tmpdir(), ownedTempPrefix("svc-checkpoint-probe")));
  const subject = spawn("unshare", ["--pid", "--fork", "--kill-child", "setsid", "sleep", "600"], { stdio: "ignore", detached: true });
  const release = holdUntilExit({ group: subject.pid, dir });
  let restoredPid: number | undefined;
  try {
    const pid = await childOf(subject, Math.min(2_000, left()));
    if (pid === undefined) return "the dry run's process did not start (unshare --pid)";
    const dump = await runCriu(criu, ["dump", "--tree", String(pid), "--images-dir", dir, "--log-file", "dump.log", "-v4"], {
      progress: [dir],
      stallMs: options.stallMs ?? PROBE_STALL_MS,
      timeoutMs: left(),
    });
    if (dump.startError) return `${criu} could not be run (${dump.startError})`;
    if (dump.abandoned) return `a dry-run \`criu dump\` ${dump.abandoned} (${criuLogReason(readIfExists(join(dir, "dump.log")))})`;
    if (dump.exitCode !== 0) return `a dry-run \`criu dump\` failed (${criuLogReason(readIfExists(join(dir, "dump.log")))})`;
    const pidFile = join(dir, "restored.pid");
    const restore = await runCriu(criu, ["restore", "--restore-detached", "--images-dir", dir, "--log-file", "restore.log", "--pidfile", pidFile, "-v4"], {
      progress: [dir],
      stallMs: options.stallMs ?? PROBE_STALL_MS,
      timeoutMs: left(),
    });
    const restoredText = readIfExists(pidFile).trim();
    if (restoredText) restoredPid = Number(restoredText);
    if (restore.abandoned) return `a dry-run \`criu restore\` ${restore.abandoned} (${criuLogReason(readIfExists(join(dir, "restore.log")))})`;
    if (restore.exitCode !== 0 || restoredPid === undefined)
      return `a dry-run \`criu restore\` failed (${criuLogReason(readIfExists(join(dir, "restore.log")))})`;
    return undefined;
  } finally {
    release();
    // The dump leaves the subject running (or kills it); the restore's copy runs detached: both go.
    if (restoredPid !== undefined) killQuietly(restoredPid);
    if (subject.pid !== undefined) killQuietly(-subject.pid);
    subject.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The forked child of `unshare --fork` (the subject itself), once it exists. */
async function childOf(parent: ChildProcess, timeoutMs: number): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && parent.pid !== undefined && parent.exitCode === null) {
    const children = readIfExists(`/proc/${parent.pid}/task/${parent.pid}/children`).trim();
    // Past unshare's fork, its child has exec'd setsid then sleep: dumped once it is `sleep`.
    if (children) {
      const pid = Number(children.split(/\s+/)[0]);
      if (readIfExists(`/proc/${pid}/comm`).trim() === "sleep") return pid;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return undefined;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone: nothing to stop
  }
}
