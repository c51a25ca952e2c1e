import { describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
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

  it.skipIf(!root)("leaves nothing running when the process exits while it waits on a hung dump", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "svc-criu-exit-"));
    try {
      // A CRIU of a name of its own, so that its processes are told from any other test's.
      const criu = join(scratch, `criu-${process.pid}`);
      copyFileSync(hangingCriu, criu);
      const probeTmp = join(scratch, "tmp");
      mkdirSync(probeTmp);
      const script = `import { checkpointProblem } from ${JSON.stringify(new URL("./criu.ts", import.meta.url).href)};
void checkpointProblem({ criu: ${JSON.stringify(criu)}, stallMs: 60_000, timeoutMs: 60_000 });
setTimeout(() => process.exit(0), 1500);`;
      const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        env: { ...process.env, TMPDIR: probeTmp },
        encoding: "utf8",
        timeout: 30_000,
      });
      expect(child.status).toBe(0);
      await new Promise((r) => setTimeout(r, 300));
      expect(spawnSync("pgrep", ["-f", `criu-${process.pid}-sleeping`], { encoding: "utf8" }).stdout.trim()).toBe("");
      // Its scratch directory (images, logs) went with it.
      expect(readdirSync(probeTmp).filter((name) => name.startsWith("svc-checkpoint-probe-"))).toEqual([]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
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
