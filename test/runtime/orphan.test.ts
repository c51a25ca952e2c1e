// No orphans: a process worker whose service (its parent) dies exits by itself once the service has been
// unreachable for SVC_ORPHAN_EXIT_MS; while the parent lives, an unreachable service is only retried.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { buildTestArtifact, REPO } from "./artifact.js";

let work: string;
const started: number[] = [];
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-orphan-"));
});
afterAll(async () => {
  for (const pid of started) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone, as it should be
    }
  }
  await rm(work, { recursive: true, force: true });
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startOrphanable(endpointName: string) {
  const artifact = await buildTestArtifact(join(work, `${endpointName}.tar.gz`));
  const parent = spawn(
    process.execPath,
    [join(REPO, "fixtures/runtime-stubborn/parent.mjs"), artifact.path, join(work, `cache-${endpointName}`), endpointName],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  started.push(parent.pid!);
  const lines = createInterface({ input: parent.stdout! });
  await new Promise<void>((resolve) => lines.on("line", (l) => l.includes('"ready"') && resolve()));
  const workerPid = Number(
    execFileSync("ps", ["-o", "pid=", "--ppid", String(parent.pid)], { encoding: "utf8" })
      .trim()
      .split(/\s+/)[0],
  );
  started.push(workerPid);
  expect(workerPid).toBeGreaterThan(0);
  return { parent, workerPid };
}

it("a worker exits when its parent service is SIGKILLed, and not before", async () => {
  const { parent, workerPid } = await startOrphanable("fns");

  // The service is unreachable, but the parent lives: the worker keeps retrying.
  await sleep(1200);
  expect(alive(workerPid)).toBe(true);

  parent.kill("SIGKILL");
  const deadline = Date.now() + 15_000;
  while (alive(workerPid) && Date.now() < deadline) await sleep(100);
  expect(alive(workerPid)).toBe(false);
});

// The parent's end of the worker's stdout/stderr pipes dies with it: the worker's notes then fail with EPIPE.
// That error once looped (uncaught exception -> note -> EPIPE) and kept a load-balanced worker spinning forever.
it("a load-balanced worker exits too when its parent is SIGKILLed (its output pipes broken)", async () => {
  const { parent, workerPid } = await startOrphanable("api");
  parent.kill("SIGKILL");
  const deadline = Date.now() + 15_000;
  while (alive(workerPid) && Date.now() < deadline) await sleep(100);
  expect(alive(workerPid)).toBe(false);
});
