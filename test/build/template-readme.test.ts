// Each template's README, followed as written: `svc init --template <name>`, then every command of the README's
// first shell block, run through a shell in the new project. `npm install` is what the project's node_modules
// already are (this svc, svc-cli, tsx, @types/node, linked: no network); `npx svc dev` runs in the background
// until the commands after it are done, and the first curl it prints is run too. `svc deploy` needs a service
// and a key: the commands after `cp .env.example .env` (the project's own key and service) run against a real
// service of this test (process driver), its address and key written into the copied .env as the README says,
// `svc deploy` included, and what the deploy serves is then called.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { REPO } from "../lb/harness.js";
import { until } from "../service/helpers.js";

const SERVICE_KEY = "template-readme-key";
let work: string;
let driver: WorkerDriver | undefined;
let service: Service | undefined;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-template-readme-"));
});
afterAll(async () => {
  await service?.close();
  await driver?.close();
  rmSync(work, { recursive: true, force: true });
});

/** The service the README's deploy-side commands talk to, started when the first of them runs. */
async function deployService(): Promise<Service> {
  driver ??= createProcessDriver({ cacheDir: join(work, "cache"), closeGraceMs: 1000 });
  service ??= await startService({ dataDir: join(work, "data"), driver, apiKeys: [SERVICE_KEY] });
  return service;
}

/** A command through a shell, without blocking the event loop (the service of this test answers it). */
function runShell(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("sh", ["-c", command], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** The commands of a README's first ```sh block, comments dropped. Pure. */
export function readmeCommands(readme: string): string[] {
  const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  return block
    .split("\n")
    .map((line) => line.replace(/\s+#\s.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

function shellEnv(target?: Service): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", HOME: work };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k.startsWith("npm_")) delete env[k];
  if (target) Object.assign(env, { SVC_API_URL: target.url, SVC_API_KEY: SERVICE_KEY });
  return env;
}

/** What a user writes into the copied .env: each empty setting the service's (its address, a key). */
function fillEnvFile(file: string, target: Service): void {
  const values: Record<string, string> = { SVC_API_URL: target.url, SVC_API_KEY: SERVICE_KEY };
  const filled = readFileSync(file, "utf8").replace(/^([A-Z_]+)=$/gm, (line, name: string) => (values[name] !== undefined ? `${name}=${values[name]}` : line));
  writeFileSync(file, filled);
}

describe.each(["textgen", "starter"])("templates/%s: its README's commands work as written", (template) => {
  const project = () => join(work, `my-${template}`);
  let dev: ChildProcess | undefined;
  let devOutput = "";
  const outputs = new Map<string, string>();

  async function stopDev(): Promise<void> {
    if (dev?.pid && dev.exitCode === null && dev.signalCode === null) {
      const exited = new Promise((resolve) => dev!.once("exit", resolve));
      process.kill(-dev.pid, "SIGINT");
      const timer = setTimeout(() => process.kill(-dev!.pid!, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
  afterAll(stopDev);

  it("init, then each command of the README", async () => {
    const init = spawnSync(process.execPath, [join(REPO, "bin", "svc.js"), "init", project(), "--template", template], {
      cwd: work,
      env: shellEnv(),
      encoding: "utf8",
    });
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
    // From `cp .env.example .env` on, commands are for a service: this test's.
    let target: Service | undefined;
    for (const command of commands) {
      if (command === "npm install") continue;
      if (command.startsWith("cp .env.example .env")) target = await deployService();
      if (command === "npx svc dev") {
        dev = spawn("sh", ["-c", command], { cwd: project(), env: shellEnv(), detached: true, stdio: ["ignore", "pipe", "pipe"] });
        dev.stdout!.on("data", (d) => (devOutput += d));
        dev.stderr!.on("data", (d) => (devOutput += d));
        await until(() => devOutput.includes("Watching for changes") || dev!.exitCode !== null, 90_000);
        expect(devOutput).toContain("Watching for changes");
        // The first curl it prints, pasted.
        const curl = /^\s*(curl .*)$/m.exec(devOutput)![1]!;
        const pasted = spawnSync("sh", ["-c", `${curl} -o /dev/null -w '%{http_code}'`], {
          cwd: project(),
          env: shellEnv(),
          encoding: "utf8",
          timeout: 60_000,
        });
        expect(pasted.stdout, `${curl}\n${pasted.stderr}`).toBe("200");
        ran++;
        continue;
      }
      // Settings come from the project's .env as the README says to fill it in, not from this test's environment:
      // svc dev keeps running meanwhile, and a command that reached it instead of the service would pass unseen.
      const r = await runShell(command, project(), shellEnv());
      expect(r.status, `${command}\n${r.stdout}\n${r.stderr}`).toBe(0);
      if (command.startsWith("cp .env.example .env")) fillEnvFile(join(project(), ".env"), target!);
      if (/^npm run /.test(command)) expect(r.stdout.trim()).not.toBe("");
      outputs.set(command, r.stdout);
      ran++;
    }
    expect(ran).toBeGreaterThanOrEqual(3);
    // Each `svc volume cp` run while svc dev ran put its file onto svc dev's volume "models", byte for byte.
    const devVolumes = join(project(), ".svc", "dev-data", "volumes");
    const devUploads = commands
      .slice(
        0,
        commands.findIndex((c) => c.startsWith("cp .env.example")),
      )
      .flatMap((c) => /^npx svc volume cp (\S+) models:(\S+)$/.exec(c) ?? []);
    expect(devUploads.length, "the README uploads weights to svc dev's volume").toBeGreaterThan(0);
    for (let i = 0; i < devUploads.length; i += 3) {
      const [, local, remote] = devUploads.slice(i, i + 3) as [string, string, string];
      const copies = readdirSync(devVolumes)
        .map((id) => join(devVolumes, id, remote))
        .filter((f) => existsSync(f));
      expect(copies.map((f) => readFileSync(f, "utf8"))).toEqual([readFileSync(join(project(), local), "utf8")]);
    }
    if (template !== "starter") return;
    // Its worker, started with svc dev before the upload, may keep the built-in weights (the README says so).
    expect(outputs.get("npm run call")).toMatch(/^embed: (built-in|volume:embedder\/weights\.json) /m);
    // The deployed embedder's worker loaded them (svc dev stopped: a script calls its session while it runs) from the service's volume (what `svc volume cp` put there).
    const env = { ...shellEnv(target), SVC_APP: `my-${template}`, SVC_ENV: "prod" };
    await stopDev();
    writeFileSync(
      join(project(), "scripts", "weights-from.ts"),
      'import { connect } from "svc";\nimport { Embedder } from "../src/embedder.js";\nconsole.log((await connect(Embedder).embed({})).weights);\n',
    );
    const deployed = await runShell("npx tsx scripts/weights-from.ts", project(), env);
    expect(deployed.stdout.trim(), deployed.stderr).toBe("volume:embedder/weights.json");
  }, 300_000);
});
