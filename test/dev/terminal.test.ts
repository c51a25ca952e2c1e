// What `svc dev` shows in its terminal, through the binary: the banner names the web console; a function's
// console.log and a failed job appear there, tagged with the endpoint and the job id, the failure naming a
// project file that exists; --quiet keeps worker output out.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { REPO } from "../lb/harness.js";
import { until } from "../service/helpers.js";

let work: string;
let project: string;
const running: ChildProcessWithoutNullStreams[] = [];

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-terminal-"));
  project = join(work, "dev-app");
  cpSync(join(REPO, "fixtures", "dev-app"), project, { recursive: true });
  writeFileSync(
    join(project, "src", "noisy.ts"),
    `import { Endpoint } from "svc";

export const talk = Endpoint({ name: "noisy", workers: [0, 1] })(async function talk(input: { fail?: boolean }) {
  console.log("hello from noisy");
  if (input.fail) throw new RangeError("nope");
  return { ok: true };
});
`,
  );
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
});

afterAll(() => {
  for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

async function dev(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true", NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  const child = spawn(process.execPath, [join(REPO, "bin", "svc.js"), "dev", "--port", "0", "--no-watch", ...args], { cwd: project, env });
  running.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const url = await until(() => /^svc dev: (http:\/\/\S+)/m.exec(stdout)?.[1], 90_000);
  const key = /^API key for this session: (\S+)/m.exec(stdout)![1]!;
  const session = JSON.parse((await import("node:fs")).readFileSync(join(project, ".svc", "dev-session.json"), "utf8")) as {
    endpoints: Record<string, { url: string }>;
  };
  const run = async (input: unknown) =>
    (await (
      await fetch(`${session.endpoints.noisy!.url}/runsync`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ input }),
      })
    ).json()) as { id: string; status: string };
  return { child, url, stdout: () => stdout, stderr: () => stderr, run };
}

it("shows the console URL, worker output and failures with their job ids and project files", async () => {
  const d = await dev([]);
  try {
    expect(d.stdout()).toContain(`web console: ${d.url}/console/`);
    const ok = await d.run({});
    expect(ok.status).toBe("COMPLETED");
    await until(() => d.stderr().includes(`[noisy ${ok.id}] hello from noisy`), 10_000);
    const failed = await d.run({ fail: true });
    expect(failed.status).not.toBe("COMPLETED");
    const line = await until(
      () =>
        d
          .stderr()
          .split("\n")
          .find((l) => l.startsWith(`[noisy ${failed.id}]`) && l.includes("failed: RangeError: nope")),
      10_000,
    );
    // Not retried in dev (a deterministic failure would only print twice): one failure line, FAILED at once.
    expect(failed.status).toBe("FAILED");
    await new Promise((r) => setTimeout(r, 500));
    expect(
      d
        .stderr()
        .split("\n")
        .filter((l) => l.startsWith(`[noisy ${failed.id}]`) && l.includes("failed: RangeError")).length,
    ).toBe(1);
    // Its stack, as a block under it: the project's frame, openable from the project's root. It is printed once
    // the job's record is final, after the worker's result reached the service (test/dev/failure-stack.test.ts).
    const frame = await until(
      () =>
        d
          .stderr()
          .split("\n")
          .find((l) => l.startsWith(`[noisy ${failed.id}]     at talk (src/noisy.ts:`)),
      30_000,
    );
    expect(frame).toMatch(/src\/noisy\.ts:5:\d+\)$/);
    // The request log lists the caller's requests, not the read of the job's record that fetched this stack.
    expect(d.stderr()).toMatch(/POST \/v2\/\S+\/runsync/);
    expect(d.stderr()).not.toContain("/status-sync/");
    // The stack is printed once: as the block under the failure's line (which names its top frame).
    expect(
      d
        .stderr()
        .split("\n")
        .filter((l) => l.startsWith(`[noisy ${failed.id}]     at talk (src/noisy.ts:`)),
      d.stderr(),
    ).toHaveLength(1);
    const file = /\((src\/noisy\.ts):\d+:\d+\)/.exec(line)?.[1];
    expect(file, line).toBe("src/noisy.ts");
    expect(existsSync(join(project, file!))).toBe(true);
  } finally {
    // Stopped here, not only after all tests: the next session of this project waits for its data directory.
    d.child.kill("SIGINT");
    await new Promise((r) => d.child.once("exit", r));
  }
}, 120_000);

it("--quiet keeps worker output out of the terminal", async () => {
  const d = await dev(["--quiet"]);
  try {
    const ok = await d.run({});
    expect(ok.status).toBe("COMPLETED");
    await new Promise((r) => setTimeout(r, 1000));
    expect(d.stderr()).not.toContain("hello from noisy");
  } finally {
    d.child.kill("SIGINT");
  }
}, 120_000);
