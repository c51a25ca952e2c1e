// Directories that killed processes left in the temporary directory are removed when a service starts: a dead
// owner's go, a live one's stay, so does one a live process still uses, and names that are not svc's own are
// never touched.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { ownedTempPrefix } from "../../src/drivers/owned-temp.js";
import { startTestService, type TestService } from "./helpers.js";

let t: TestService | undefined;
const made: string[] = [];
afterAll(async () => {
  await t?.close();
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** The pid of a process that has exited. */
function deadPid(): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    child.on("error", reject);
    child.on("exit", () => resolve(child.pid!));
  });
}

function dir(name: string): string {
  const path = join(tmpdir(), name);
  mkdirSync(path);
  writeFileSync(join(path, "left.sock"), "");
  made.push(path);
  return path;
}

it("removes a dead process's directories at start, keeps a live process's, one a live worker still uses, and others'", async () => {
  const dead = await deadPid();
  const suffix = `${Date.now().toString(36)}`;
  const deadLb = dir(`${ownedTempPrefix("svc-lb", dead)}${suffix}`);
  const deadSandbox = dir(`${ownedTempPrefix("svc-sandbox", dead)}${suffix}`);
  // A worker the dead service left running (to be adopted by its restart) still listens in this one.
  const stillUsed = dir(`${ownedTempPrefix("svc-lb", dead)}used${suffix}`);
  const live = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], {
    stdio: "ignore",
    env: { ...process.env, SVC_LB_SOCKET: join(stillUsed, "left.sock") },
  });
  try {
    const liveLb = dir(`${ownedTempPrefix("svc-lb", live.pid!)}${suffix}`);
    const unnamed = dir(`svc-lb-${suffix}`);

    t = await startTestService();

    expect(existsSync(deadLb)).toBe(false);
    expect(existsSync(deadSandbox)).toBe(false);
    expect(existsSync(join(stillUsed, "left.sock"))).toBe(true);
    expect(existsSync(join(liveLb, "left.sock"))).toBe(true);
    expect(existsSync(join(unnamed, "left.sock"))).toBe(true);
  } finally {
    live.kill();
  }
});
