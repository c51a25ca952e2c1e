import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ownedTempPrefix, pidAlive, staleTempDirs, sweepStaleTempDirs, tempDirOwner } from "./owned-temp.js";

describe("svc's temporary directories", () => {
  it("carry their owner's pid, read back from the name only for svc's own kinds", () => {
    expect(ownedTempPrefix("svc-lb", 4321)).toBe("svc-lb-pid4321-");
    expect(tempDirOwner("svc-lb-pid4321-Ab12Cd")).toBe(4321);
    expect(tempDirOwner("svc-sandbox-pid7-x")).toBe(7);
    // CRIU's dry run, left by a process killed while it probed.
    expect(tempDirOwner("svc-checkpoint-probe-pid88-Zz9")).toBe(88);
    // Docker's staged artifacts belong to a session that a restarted service adopts, not to a pid.
    expect(tempDirOwner("svc-worker-artifacts-pid99-session")).toBeUndefined();
    for (const other of [
      "svc-lb-Ab12Cd",
      "svc-lb-wait-pid12-",
      "svc-sandbox-probe-12",
      "svc-lbx-pid12-a",
      "my-svc-lb-pid12-a",
      "svc-lb-pid0-a",
      "svc-lb-pid12",
      "svc-build-pid12-a",
    ]) {
      expect(tempDirOwner(other)).toBeUndefined();
    }
  });

  it("are stale when their owner is dead, never when it lives, is this process, or the name is not svc's", () => {
    const names = [
      "svc-lb-pid100-a",
      "svc-sandbox-pid200-b",
      "svc-sandbox-pid300-s",
      "svc-lb-pid400-c",
      "svc-lb-abcdef",
      "other-pid100-x",
      "svc-sandbox-pid500-d",
      "svc-worker-artifacts-smwyxrihbezthh6",
    ];
    const alive = (pid: number) => pid === 200 || pid === 400;
    expect(staleTempDirs(names, alive, 500)).toEqual(["svc-lb-pid100-a", "svc-sandbox-pid300-s"]);
    // A dead owner's directory that a live process still uses (an adopted worker's socket) stays.
    expect(staleTempDirs(names, alive, 500, (name) => name === "svc-lb-pid100-a")).toEqual(["svc-sandbox-pid300-s"]);
  });

  it("tells a live pid from a gone one", () => {
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(2 ** 30)).toBe(false);
  });

  it("removes only stale directories, not files or links of the same names", () => {
    const dir = mkdtempSync(join(tmpdir(), "owned-temp-test-"));
    try {
      mkdirSync(join(dir, "svc-lb-pid100-dead"));
      writeFileSync(join(dir, "svc-lb-pid100-dead", "w.sock"), "");
      mkdirSync(join(dir, "svc-lb-pid200-live"));
      writeFileSync(join(dir, "svc-sandbox-pid100-file"), "");
      mkdirSync(join(dir, "elsewhere"));
      symlinkSync(join(dir, "elsewhere"), join(dir, "svc-sandbox-pid100-link"));
      const removed = sweepStaleTempDirs({ dir, alive: (pid) => pid === 200 });
      expect(removed).toEqual(["svc-lb-pid100-dead"]);
      expect(staleTempDirs(["svc-lb-pid200-live"], () => true)).toEqual([]);
      expect(new Set(readdirSync(dir))).toEqual(new Set(["svc-lb-pid200-live", "svc-sandbox-pid100-file", "elsewhere", "svc-sandbox-pid100-link"]));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
