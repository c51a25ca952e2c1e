// Swarm mode for the test files that need it (test/swarm/*.test.ts), which vitest may run side by side: the first
// to need it runs `docker swarm init --advertise-addr 127.0.0.1` when the engine is in no swarm, and the last one
// done leaves it (`docker swarm leave --force`) only if one of them made it. A swarm that was there before is left
// alone. Users are counted by files named after their process, under a lock directory (mkdir is atomic).

import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const DIR = join(tmpdir(), "svc-test-swarm");
const LOCK = join(DIR, "lock");
const MADE = join(DIR, "made-by-tests");

export const swarmState = (): string => spawnSync("docker", ["info", "--format", "{{.Swarm.LocalNodeState}}"], { encoding: "utf8" }).stdout.trim();

function locked<T>(fn: () => T): T {
  mkdirSync(DIR, { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // Held by another test file (init and leave take a few seconds): wait, bounded.
      if (Date.now() > deadline) throw new Error(`the swarm lock ${LOCK} was held for 2 minutes`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Make sure the engine is a swarm manager, for this process until leaveSwarm(). */
export function joinSwarm(): void {
  locked(() => {
    if (swarmState() !== "active") {
      execFileSync("docker", ["swarm", "init", "--advertise-addr", "127.0.0.1"], { stdio: "ignore" });
      writeFileSync(MADE, "");
    }
    writeFileSync(join(DIR, `user-${process.pid}`), "");
  });
}

/** This process is done with the swarm; the last user leaves it when the tests made it. */
export function leaveSwarm(): void {
  locked(() => {
    rmSync(join(DIR, `user-${process.pid}`), { force: true });
    const users = readdirSync(DIR).filter((f) => f.startsWith("user-") && alive(Number(f.slice(5))));
    if (users.length > 0 || !existsSync(MADE)) return;
    spawnSync("docker", ["swarm", "leave", "--force"], { stdio: "ignore" });
    // The bridge swarm init made for the tasks' outside traffic goes with the swarm (the engine keeps it).
    spawnSync("docker", ["network", "rm", "docker_gwbridge"], { stdio: "ignore" });
    rmSync(MADE, { force: true });
  });
}
