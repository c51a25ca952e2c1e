import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { prepareVolumeDir } from "./volume-dir.js";

it("makes a volume's directory open to every worker of the volume", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-volume-dir-"));
  try {
    const path = join(dir, "volumes", "vol0123456789ab");
    prepareVolumeDir(path);
    expect(statSync(path).mode & 0o777).toBe(0o777);
    prepareVolumeDir(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
