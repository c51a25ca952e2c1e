import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkpointProblem, criuLogReason, watchCriu } from "./criu.js";
import { snapshotFinding } from "../doctor/checks.js";

const hangingCriu = fileURLToPath(new URL("../../test/fakes/criu/hanging-criu", import.meta.url));
const root = process.platform === "linux" && process.getuid?.() === 0;

describe("a CRIU run under the progress watch", () => {
  const scratch = () => mkdtempSync(join(tmpdir(), "svc-criu-watch-"));

  it("is abandoned once its log stops growing, and killed", async () => {
    const dir = scratch();
    try {
      const child = spawn(hangingCriu, ["dump", "--images-dir", dir, "--log-file", "dump.log"], { stdio: "ignore" });
      const started = Date.now();
      const run = await watchCriu(child, { progress: [dir], stallMs: 600 });
      expect(run.abandoned).toBe("made no progress for 1 s");
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(child.signalCode).toBe("SIGKILL");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("lets a run that keeps writing go on past the stall bound", async () => {
    const dir = scratch();
    try {
      // Writes a line every 100 ms for 1.5 s: longer than the bound, never silent for it.
      const script = `for i in $(seq 15); do echo "($i) dumping pages" >> ${join(dir, "dump.log")}; sleep 0.1; done`;
      const child = spawn("sh", ["-c", script], { stdio: "ignore" });
      const run = await watchCriu(child, { progress: [dir], stallMs: 600 });
      expect(run).toEqual({ exitCode: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports a CRIU that cannot be run", async () => {
    const child = spawn("/nonexistent/criu", [], { stdio: "ignore" });
    expect((await watchCriu(child, { progress: [] })).startError).toMatch(/ENOENT/);
  });

  it("names the log's last error", () => {
    expect(criuLogReason("(0.1) Info x\n(0.2) Error (criu/util.c:1533): rlimit: no\n(0.3) Warn y\n")).toBe("(0.2) Error (criu/util.c:1533): rlimit: no");
    expect(criuLogReason("(0.1) Info x\n(0.3) Warn y\n")).toBe("(0.3) Warn y");
    expect(criuLogReason("")).toBe("no output");
  });
});

describe("the host's checkpoint dry run", () => {
  it.skipIf(!root)("says a CRIU whose check passes but whose dump hangs cannot checkpoint, within its bound", async () => {
    const started = Date.now();
    const problem = await checkpointProblem({ criu: hangingCriu, stallMs: 1_000 });
    expect(problem).toMatch(/^a dry-run `criu dump` made no progress for 1 s \(.*RLIMIT_NOFILE/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("says CRIU is missing", async () => {
    expect(await checkpointProblem({ criu: "/nonexistent/criu" })).toMatch(root ? /not installed/ : /Linux only|needs root/);
  });

  it("is a doctor finding: a warning where CRIU is there but cannot checkpoint, information where it is absent", () => {
    expect(snapshotFinding(undefined).level).toBe("ok");
    const hung = snapshotFinding("a dry-run `criu dump` made no progress for 3 s (rlimit)");
    expect(hung.level).toBe("warn");
    expect(hung.fix).toMatch(/CAP_SYS_RESOURCE/);
    expect(snapshotFinding("/usr/sbin/criu is not installed (ENOENT)").level).toBe("info");
  });
});
