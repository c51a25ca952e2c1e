// `svc dev` as a person runs it: the binary under a real pseudo-terminal (util-linux `script`), its project
// edited the way editors save. Five saves, plain writes and atomic saves (a temporary file renamed over the
// original) alternating, are five rebuilds; a new endpoint's URL and curl are printed, and its removal is said.

import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { REPO } from "../lb/harness.js";
import { until } from "../service/helpers.js";

let work: string;
let project: string;
let dev: ChildProcess;
let screen = "";

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-pty-"));
  project = join(work, "dev-app");
  cpSync(join(REPO, "fixtures", "dev-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: "xterm" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI" || k === "NO_COLOR") delete env[k];
  // `script` gives the command a terminal of its own; its output is the screen.
  dev = spawn("script", ["-q", "-f", "-e", "-c", `${process.execPath} ${join(REPO, "bin", "svc.js")} dev --port 0`, "/dev/null"], {
    cwd: project,
    env,
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
  dev.stdout!.on("data", (d) => (screen += d));
  await until(() => screen.includes("Watching for changes"), 90_000);
}, 120_000);

afterAll(() => {
  if (dev?.pid) {
    try {
      process.kill(-dev.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

const count = (text: string) => screen.split(text).length - 1;

it("rebuilds once per save, whether the editor writes in place or renames a temporary file over it", async () => {
  const file = join(project, "src", "tally.ts");
  for (let i = 0; i < 5; i++) {
    const before = count("redeployed:");
    const text = `${readFileSync(file, "utf8")}\n// save ${i}\n`;
    if (i % 2 === 0) writeFileSync(file, text);
    else {
      writeFileSync(`${file}.tmp~`, text);
      renameSync(`${file}.tmp~`, file);
    }
    await until(() => count("redeployed:") === before + 1, 60_000);
  }
  await new Promise((r) => setTimeout(r, 1000));
  expect(count("rebuilding...")).toBe(5);
  expect(count("redeployed:")).toBe(5);
  // Each says what changed: a comment changes no endpoint's bundled code, so every endpoint keeps its workers.
  expect(screen).toMatch(/redeployed: no endpoint's code or settings changed; (\w+, ){3}\w+ keep their workers; queued jobs are kept/);
  expect(count("redeployed: no endpoint's code or settings changed;")).toBe(5);
  // On a terminal, the steps have their spinner marks and colours.
  expect(screen).toContain("\u001b[");
}, 120_000);

it("prints a new endpoint's URL and curl, and says when it is gone", async () => {
  const file = join(project, "src", "newbie.mjs");
  writeFileSync(file, 'import { Endpoint } from "svc";\nexport const hi = Endpoint({ name: "newbie", workers: [0, 1] })(async function hi() { return 1; });\n');
  await until(() => screen.includes("new endpoint(s):"), 60_000);
  const after = screen.slice(screen.indexOf("new endpoint(s):"));
  expect(after).toMatch(/newbie\s+queue\s+http:\/\/127\.0\.0\.1:\d+\/v2\/[0-9a-f]{16}/);
  expect(after).toMatch(/curl -s -X POST http:\/\/127\.0\.0\.1:\d+\/v2\/[0-9a-f]{16}\/runsync/);
  rmSync(file);
  await until(() => screen.includes("endpoint newbie is gone from the project: removed"), 60_000);
}, 120_000);

it("a save that breaks the module keeps the last good code serving, says the error once with its file and line, and recovers on the next save", async () => {
  const file = join(project, "src", "tally.ts");
  const good = readFileSync(file, "utf8");
  const session = JSON.parse(readFileSync(join(project, ".svc", "dev-session.json"), "utf8")) as {
    url: string;
    apiKey: string;
    endpoints: Record<string, { url: string }>;
  };
  const add = async () => {
    const res = await fetch(`${session.endpoints.tally!.url}/runsync`, {
      method: "POST",
      headers: { authorization: `Bearer ${session.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { n: 1 }, function: "add" }),
    });
    return (await res.json()) as { status: string; output?: { total: number } };
  };
  expect((await add()).status).toBe("COMPLETED");
  const failedBefore = count("rebuild failed");
  writeFileSync(file, good.replace("// One instance", 'if (!process.env.TALLY_SEED) throw new Error("TALLY_SEED is not set");\n// One instance'));
  await until(() => count("rebuild failed") === failedBefore + 1, 60_000);
  await new Promise((r) => setTimeout(r, 1500));
  const failure = screen.slice(screen.lastIndexOf("rebuild failed"));
  expect(failure).toMatch(/src\/tally\.ts:3:\d+/);
  expect(count("TALLY_SEED is not set")).toBe(1);
  expect(count("rebuild failed")).toBe(failedBefore + 1);
  expect((await add()).status).toBe("COMPLETED");
  const deployedBefore = count("redeployed:");
  writeFileSync(file, good);
  await until(() => count("redeployed:") === deployedBefore + 1, 60_000);
  expect((await add()).status).toBe("COMPLETED");
}, 120_000);

it("every rebuild ends in one line, the same broken save as often as it is made: the error with its file and line each time", async () => {
  const file = join(project, "src", "tally.ts");
  const good = readFileSync(file, "utf8");
  const broken = good.replace("// One instance", 'if (!process.env.TALLY_SEED) throw new Error("TALLY_SEED is not set");\n// One instance');
  const ends = () => count("rebuild failed") + count("redeployed:");
  for (const [text, outcome] of [
    [broken, "rebuild failed"],
    [good, "redeployed:"],
    [broken, "rebuild failed"],
    [broken, "rebuild failed"],
    [good, "redeployed:"],
  ] as const) {
    const started = count("rebuilding...");
    const ended = ends();
    const before = count(outcome);
    writeFileSync(file, `${text}\n// ${Math.random()}\n`);
    await until(() => count("rebuilding...") === started + 1 && ends() === ended + 1, 60_000);
    expect(count(outcome)).toBe(before + 1);
    // The error's lines may come in a later write than the line that begins it.
    const named = /TALLY_SEED is not set[\s\S]*src\/tally\.ts:3:\d+|src\/tally\.ts:3:\d+[\s\S]*TALLY_SEED is not set/;
    if (outcome === "rebuild failed") await until(() => named.test(screen.slice(screen.lastIndexOf("rebuild failed"))), 10_000);
  }
}, 180_000);

it("prints one line per request: method, path, status and time", async () => {
  const session = JSON.parse(readFileSync(join(project, ".svc", "dev-session.json"), "utf8")) as {
    apiKey: string;
    endpoints: Record<string, { id: string; url: string }>;
  };
  const res = await fetch(`${session.endpoints.tally!.url}/runsync`, {
    method: "POST",
    headers: { authorization: `Bearer ${session.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ input: { n: 1 }, function: "add" }),
  });
  expect(res.status).toBe(200);
  const line = new RegExp(`POST /v2/${session.endpoints.tally!.id}/runsync 200 \\d+ms`);
  await until(() => line.test(screen), 10_000);
}, 30_000);

it("Ctrl-C stops quietly: no worker 'exited unexpectedly', none of the runtime's lifecycle notes", async () => {
  const stopAt = screen.length;
  dev.stdin!.write("\x03");
  await until(() => dev.exitCode !== null, 30_000);
  const tail = screen.slice(stopAt);
  expect(tail).toContain("stopping...");
  expect(screen).not.toMatch(/exited unexpectedly/);
  expect(screen).not.toMatch(/draining \(|drained; exiting/);
  // Nothing of the session keeps running: a terminal's Ctrl-C reaches the sandbox wrappers too (the foreground
  // process group), and a worker whose wrapper died that way used to outlive the session, saying "401" for ~30 s.
  const url = /svc dev: (http:\/\/\S+)/.exec(screen)![1]!;
  await new Promise((r) => setTimeout(r, 1000));
  expect(workersOf(url)).toEqual([]);
  expect(screen.slice(stopAt)).not.toMatch(/401 Unauthorized/);
}, 60_000);

/** Pids of the worker processes on this machine whose service is `url` (read from their environment). */
function workersOf(url: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
      if (environ.includes(`SVC_API_URL=${url}`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}
