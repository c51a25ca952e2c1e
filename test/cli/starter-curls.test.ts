// End to end: every curl `svc dev` prints for a fresh `svc init` project (starter and textgen templates),
// pasted into a shell as printed, gets an answer: 200 with status COMPLETED from a queue-based endpoint (the
// curls send an empty input, {}), 200 from a load-balanced one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { firstJsonOnStdout } from "../cli-output.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");

interface Ready {
  url: string;
  endpoints: Array<{ name: string; type: "queue" | "lb"; curl: string }>;
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-starter-curls-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Stopped as a user stops it (Ctrl-C), so its workers go with it; SIGKILL only if it hangs. */
async function stop(dev: ChildProcessWithoutNullStreams): Promise<void> {
  if (dev.exitCode !== null) return;
  const exited = new Promise((resolve) => dev.once("exit", resolve));
  dev.kill("SIGINT");
  const timer = setTimeout(() => dev.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

describe.each([
  { template: "starter", endpoints: ["api", "embedder", "gpu-worker", "llm"] },
  { template: "textgen", endpoints: ["textgen"] },
])("svc init --template $template, then svc dev", ({ template, endpoints }) => {
  let dev: ChildProcessWithoutNullStreams;
  let ready: Ready;
  let stderr = "";

  beforeAll(async () => {
    const project = join(work, template);
    const init = spawnSync(process.execPath, [bin, "init", project, "--template", template], { encoding: "utf8" });
    expect(init.status, init.stderr).toBe(0);
    mkdirSync(join(project, "node_modules"));
    symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
    const env = { ...process.env, CI: "true" };
    for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
    dev = spawn(process.execPath, [bin, "dev", "--json", "--port", "0", "--no-watch"], { cwd: project, env });
    dev.stderr.on("data", (d) => (stderr += d.toString()));
    ready = await firstJsonOnStdout<Ready>(dev, "svc dev", 90_000, () => stderr);
  }, 120_000);

  afterAll(() => stop(dev), 20_000);

  it("prints a curl for every endpoint, and each answers as pasted", () => {
    expect(ready.endpoints.map((e) => e.name).sort()).toEqual(endpoints);
    for (const endpoint of ready.endpoints) {
      const run = spawnSync("bash", ["-c", `${endpoint.curl} -w '\\n%{http_code}'`], { encoding: "utf8", timeout: 60_000 });
      expect(run.status, `${endpoint.name}: ${run.stderr}`).toBe(0);
      const lines = run.stdout.split("\n");
      const status = lines.pop();
      const body = lines.join("\n");
      expect(`${endpoint.name} ${status}`, body).toBe(`${endpoint.name} 200`);
      if (endpoint.type === "queue") {
        const job = JSON.parse(body) as { status: string; error?: string };
        expect(`${endpoint.name} ${job.status}`, body).toBe(`${endpoint.name} COMPLETED`);
      }
    }
  }, 120_000);
});
