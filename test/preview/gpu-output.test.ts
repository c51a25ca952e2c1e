// What `svc deploy --preview` prints about GPUs, through the real binary and a real Docker engine, on a host made
// GPU-less by the fake nvidia-smi (test/fakes/gpu, failing as it does without a driver): a failed GPU check is a
// step of its own ("✖ Checking for GPUs", never the build's last step), and with --allow-cpu-fallback each
// endpoint's fallback warning is printed once, not once per path it reaches the terminal by.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { describeDocker, docker, engineUp, leftovers } from "../docker/engine.js";
import { firstJsonOnStdout } from "../cli-output.js";
import { runInPty } from "../pty.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const FAKE_GPU_BIN = join(repo, "test", "fakes", "gpu");
const NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.";

let work: string;
let project: string;
const sessions = new Set<string>();
const children: ChildProcessWithoutNullStreams[] = [];

/** A host whose nvidia-smi finds no driver (and no device node or nvidia runtime says otherwise). */
async function gpuLessHost(): Promise<boolean> {
  if (existsSync("/dev/nvidia0")) return false;
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  return !(info.Runtimes && "nvidia" in info.Runtimes);
}

function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true", PATH: `${FAKE_GPU_BIN}${delimiter}${process.env.PATH ?? ""}`, FAKE_NVIDIA_SMI_FAIL: NO_DRIVER };
  delete env.SVC_API_KEY;
  delete env.SVC_API_URL;
  delete env.NO_COLOR;
  delete env.FORCE_COLOR;
  return env;
}

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-preview-gpu-"));
  // The preview fixture plus a GPU endpoint.
  project = join(work, "preview-app");
  cpSync(join(repo, "fixtures", "preview-app"), project, { recursive: true });
  mkdirSync(join(project, "src"), { recursive: true });
  writeFileSync(
    join(project, "src", "upscale.ts"),
    'import { Endpoint } from "svc";\nconst gpu = Endpoint({ name: "upscaler", gpu: ["ADA_24"] });\nexport const upscale = gpu(async function upscale(input: { n: number }) { return input.n * 2; });\n',
  );
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (engineUp) for (const session of sessions) await cleanupStale({ [LABELS.session]: session }, { docker }).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
});

describeDocker("svc deploy --preview: what it prints about GPUs", () => {
  it("a failed GPU check fails its own step, not the build's last one", async (ctx) => {
    if (!(await gpuLessHost())) ctx.skip();
    const { code, output } = await runInPty([process.execPath, bin, "deploy", "--preview", "--port", "0", "-C", project], { ...cliEnv(), CI: "" }, [], 90_000);
    const text = stripAnsi(output);
    expect(code, text).toBe(1);
    expect(text).toMatch(/✔ Packing the artifact/);
    expect(text).not.toMatch(/✖ Packing the artifact/);
    expect(text).toMatch(/✖ Checking for GPUs/);
    expect(text).toContain("Endpoint(s) upscaler need a GPU, but");
    // Without a terminal: the step line that precedes the error is the GPU check's.
    const plain = await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, [bin, "deploy", "--preview", "--port", "0", "-C", project], { env: cliEnv() });
      children.push(child);
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d.toString()));
      child.on("exit", () => resolve(stderr));
    });
    const steps = plain.split("\n").filter((l) => l.endsWith("..."));
    expect(steps.at(-1), plain).toBe("Checking for GPUs...");
  }, 180_000);

  it("with --allow-cpu-fallback, each GPU endpoint's fallback warning is printed once", async (ctx) => {
    if (!(await gpuLessHost())) ctx.skip();
    const child = spawn(process.execPath, [bin, "deploy", "--preview", "--json", "--port", "0", "--allow-cpu-fallback", "-C", project], { env: cliEnv() });
    children.push(child);
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const ready = await firstJsonOnStdout<{ session: string; endpoints: Array<{ name: string }> }>(child, "svc deploy --preview", 150_000, () => stderr);
    sessions.add(ready.session);
    expect(ready.endpoints.map((e) => e.name)).toContain("upscaler");
    // Its worker is up (the preview waited for it), so every start-up warning has been printed by now.
    child.kill("SIGINT");
    expect(await exit, stderr).toBe(0);
    const warnings = stderr.split("\n").filter((l) => l.includes('endpoint "upscaler" asks for a GPU'));
    expect(warnings, stderr).toHaveLength(1);
    expect(warnings[0]).toMatch(/^warning: endpoint "upscaler" asks for a GPU but .*; running it on CPU$/);
    expect(await leftovers(ready.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 240_000);
});
