import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { strayErrorReporter } from "./last-resort.js";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

describe("the last resort", () => {
  it("logs an error once with its stack, then counts repeats at most once a minute", () => {
    const lines: string[] = [];
    let t = 0;
    const lr = strayErrorReporter(
      (m) => lines.push(m),
      () => t,
    );
    {
      for (let i = 0; i < 5; i++) lr.report("uncaught exception", new Error("boom"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^uncaught exception \(the service keeps serving\): Error: boom\n\s+at /);
      t = 61_000;
      lr.report("uncaught exception", new Error("boom"));
      expect(lines[1]).toBe("uncaught exception (the service keeps serving): boom (5 more times)");
      lr.report("unhandled rejection", "plain reason");
      expect(lines[2]).toMatch(/^unhandled rejection \(the service keeps serving\): Error: plain reason/);
      expect(lr.stats.caught).toBe(7);
    }
  });

  it("keeps a real service process answering after an uncaught exception and an unhandled rejection", async () => {
    // A child process that owns its process-level handlers, as `svc server` does, then hits both kinds of
    // stray error; without the last resort node would exit on the first.
    // The data directory is made and removed here: the child is killed, it cannot clean up after itself.
    const dataDir = mkdtempSync(join(tmpdir(), "svc-lr-"));
    const script = `
      import { startService } from ${JSON.stringify(join(REPO, "dist/service/index.js"))};
      import { installLastResort } from ${JSON.stringify(join(REPO, "dist/service/last-resort.js"))};
      installLastResort((m) => process.stderr.write(m + "\\n"));
      const service = await startService({ dataDir: ${JSON.stringify(dataDir)}, apiKeys: ["k"] });
      process.stdout.write(service.url + "\\n");
      process.stdin.on("data", () => {
        setTimeout(() => { throw new Error("stray stream error"); }, 0);
        Promise.reject(new Error("stray rejection"));
      });
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    try {
      const [first] = (await once(child.stdout, "data")) as [Buffer];
      const url = first.toString().trim();
      expect((await fetch(`${url}/openapi.json`)).status).toBe(200);
      child.stdin.write("go\n");
      const deadline = Date.now() + 5000;
      while (!/stray rejection/.test(stderr) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(child.exitCode).toBeNull();
      expect(stderr).toContain("uncaught exception (the service keeps serving): Error: stray stream error");
      expect(stderr).toContain("unhandled rejection (the service keeps serving): Error: stray rejection");
      const res = await fetch(`${url}/openapi.json`);
      expect(res.status).toBe(200);
    } finally {
      const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : once(child, "exit");
      child.kill("SIGKILL");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
