// Each template's README, followed as written: `svc init --template <name>`, then every command of the README's
// first shell block, run through a shell in the new project. `npm install` is what the project's node_modules
// already are (this svc, svc-cli, tsx, @types/node, linked: no network); `npx svc dev` runs in the background
// until the commands after it are done, and the first curl it prints is run too. `svc deploy` needs a service
// and a key: the printed-commands-after-login test (test/cli/login-curl.test.ts) covers it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO } from "../lb/harness.js";
import { until } from "../service/helpers.js";

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-template-readme-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The commands of a README's first ```sh block, comments dropped. Pure. */
export function readmeCommands(readme: string): string[] {
  const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  return block
    .split("\n")
    .map((line) => line.replace(/\s+#\s.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

function shellEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", HOME: work };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k.startsWith("npm_")) delete env[k];
  return env;
}

describe.each(["textgen", "starter"])("templates/%s: its README's commands work as written", (template) => {
  const project = () => join(work, `my-${template}`);
  let dev: ChildProcess | undefined;
  let devOutput = "";

  afterAll(async () => {
    if (dev?.pid && dev.exitCode === null) {
      const exited = new Promise((resolve) => dev!.once("exit", resolve));
      process.kill(-dev.pid, "SIGINT");
      const timer = setTimeout(() => process.kill(-dev!.pid!, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  });

  it("init, then each command of the README", async () => {
    const init = spawnSync(process.execPath, [join(REPO, "bin", "svc.js"), "init", project(), "--template", template], { cwd: work, env: shellEnv(), encoding: "utf8" });
    expect(init.status, init.stderr).toBe(0);
    const modules = join(project(), "node_modules");
    mkdirSync(join(modules, ".bin"), { recursive: true });
    mkdirSync(join(modules, "@types"), { recursive: true });
    symlinkSync(join(REPO, "packages", "svc"), join(modules, "svc"));
    symlinkSync(REPO, join(modules, "svc-cli"));
    symlinkSync(join(REPO, "node_modules", "tsx"), join(modules, "tsx"));
    symlinkSync(join(REPO, "node_modules", "@types", "node"), join(modules, "@types", "node"));
    symlinkSync(join(REPO, "bin", "svc.js"), join(modules, ".bin", "svc"));
    symlinkSync(join(REPO, "node_modules", "tsx", "dist", "cli.mjs"), join(modules, ".bin", "tsx"));

    const commands = readmeCommands(readFileSync(join(project(), "README.md"), "utf8"));
    expect(commands).toContain("npx svc dev");
    let ran = 0;
    for (const command of commands) {
      if (command === "npm install") continue;
      if (/^npx svc deploy\b/.test(command)) continue;
      if (command === "npx svc dev") {
        dev = spawn("sh", ["-c", command], { cwd: project(), env: shellEnv(), detached: true, stdio: ["ignore", "pipe", "pipe"] });
        dev.stdout!.on("data", (d) => (devOutput += d));
        dev.stderr!.on("data", (d) => (devOutput += d));
        await until(() => devOutput.includes("Watching for changes") || dev!.exitCode !== null, 90_000);
        expect(devOutput).toContain("Watching for changes");
        // The first curl it prints, pasted.
        const curl = /^\s*(curl .*)$/m.exec(devOutput)![1]!;
        const pasted = spawnSync("sh", ["-c", `${curl} -o /dev/null -w '%{http_code}'`], { cwd: project(), env: shellEnv(), encoding: "utf8", timeout: 60_000 });
        expect(pasted.stdout, `${curl}\n${pasted.stderr}`).toBe("200");
        ran++;
        continue;
      }
      const r = spawnSync("sh", ["-c", command], { cwd: project(), env: shellEnv(), encoding: "utf8", timeout: 90_000 });
      expect(r.status, `${command}\n${r.stdout}\n${r.stderr}`).toBe(0);
      if (/^npm run /.test(command)) expect(r.stdout.trim()).not.toBe("");
      ran++;
    }
    expect(ran).toBeGreaterThanOrEqual(3);
  }, 240_000);
});
