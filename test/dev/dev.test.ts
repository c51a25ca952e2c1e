// End to end: the `svc` binary runs `svc dev` on a fixture project; scripts, curl-style clients and `svc logs`
// use the session; a source change replaces the workers without losing queued jobs; Ctrl-C cleans up.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { firstJsonOnStdout } from "../cli-output.js";
import { processWorkerPids } from "../server-process.js";
import { call as callService, startTestService } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");

interface Ready {
  url: string;
  app: string;
  apiKey: string;
  endpoints: Array<{ name: string; id: string; url: string }>;
}

let work: string;
let project: string;
let dev: ChildProcessWithoutNullStreams;
let ready: Ready;
let stderr = "";

function endpoint(name: string) {
  const e = ready.endpoints.find((x) => x.name === name);
  if (!e) throw new Error(`no endpoint ${name} in ${JSON.stringify(ready.endpoints)}`);
  return e;
}

async function call(path: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(path, {
    method: init.method ?? "POST",
    headers: { authorization: `Bearer ${ready.apiKey}`, "content-type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** Pids of worker processes whose code lives in `dir` (by their environment, or their sandbox's mounts). */
function workersOf(dir: string): number[] {
  return processWorkerPids(dir);
}

function runEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  // No stored profile unless a test writes one: the rule for which service a command talks to reads them.
  const envs: NodeJS.ProcessEnv = { ...process.env, SVC_CONFIG_DIR: join(work, "no-profiles") };
  delete envs.SVC_APP;
  delete envs.SVC_ENV;
  delete envs.SVC_API_URL;
  return { ...envs, ...env };
}

function runNode(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, args, { cwd: project, env: runEnv(env), encoding: "utf8", timeout: 60_000 });
}

/** runNode without blocking this process: for commands talking to a service this process runs. */
function runNodeAsync(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: project, env: runEnv(env), timeout: 150_000 });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-e2e-"));
  project = join(work, "dev-app");
  cpSync(join(repo, "fixtures", "dev-app"), project, { recursive: true });
  // Scripts in the project import "svc" like a user's project does.
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  const env = { ...process.env, CI: "true" };
  delete env.SVC_API_KEY;
  delete env.SVC_API_URL;
  dev = spawn(process.execPath, [bin, "dev", "--port", "0", "--json"], { cwd: project, env });
  dev.stderr.on("data", (d) => (stderr += d.toString()));
  ready = await firstJsonOnStdout<Ready>(dev, "svc dev", 90_000, () => stderr);
}, 120_000);

afterAll(async () => {
  if (dev && dev.exitCode === null) {
    dev.kill("SIGKILL");
  }
  rmSync(work, { recursive: true, force: true });
});

describe("svc dev", () => {
  it("serves every endpoint of the project behind the job API", async () => {
    expect(ready.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.endpoints.map((e) => e.name).sort()).toEqual(["counter", "greeter", "slowpoke", "tally"]);
    for (const e of ready.endpoints) expect(e.url).toBe(`${ready.url}/v2/${e.id}`);
    const res = await call(`${endpoint("greeter").url}/runsync`, { body: { input: { who: "curl" } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "COMPLETED", output: { message: "hello curl" } });
    expect(typeof res.body.delayTime).toBe("number");
    expect(typeof res.body.executionTime).toBe("number");
  });

  it("runs a class endpoint with one instance per worker", async () => {
    const url = `${endpoint("tally").url}/runsync`;
    const first = await call(url, { body: { input: { n: 2 } } });
    const second = await call(url, { body: { input: { n: 3 } } });
    expect(first.body.output).toEqual({ total: 2 });
    expect(second.body.output).toEqual({ total: 5 });
  });

  it("is the context of a script in the project: calls, streams and job handles", () => {
    const result = runNode(["scripts/call.mjs", "script"]);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    const printed = JSON.parse(result.stdout);
    expect(printed.result).toEqual({ message: "hello script" });
    expect(printed.chunks).toEqual([1, 2, 3]);
    expect(printed.waited).toEqual({ slept: 50 });
    expect(printed.jobId).toMatch(/\S+/);
  });

  it("a script with no session or app context gets told what to do", () => {
    const elsewhere = join(work, "elsewhere");
    mkdirSync(join(elsewhere, "node_modules"), { recursive: true });
    symlinkSync(join(repo, "packages", "svc"), join(elsewhere, "node_modules", "svc"), "dir");
    writeFileSync(
      join(elsewhere, "call.mjs"),
      `import { Endpoint } from "svc";\nconst f = Endpoint({ name: "greeter" })(async function greet() {});\ntry { await f({}); } catch (e) { console.error(e.message + "\\n" + e.hint); process.exitCode = 3; }\n`,
    );
    const result = spawnSync(process.execPath, ["call.mjs"], { cwd: elsewhere, encoding: "utf8", env: { PATH: process.env.PATH ?? "" } });
    expect(result.status).toBe(3);
    expect(result.stderr).toContain('Cannot call endpoint "greeter"');
    expect(result.stderr).toContain("Start `svc dev`");
    expect(result.stderr).toContain("SVC_APP and SVC_ENV");
  });

  it("svc logs shows handler output per endpoint and per job", async () => {
    const res = await call(`${endpoint("greeter").url}/runsync`, { body: { input: { who: "logged" } } });
    const jobId = res.body.id as string;
    // Logs are shipped in batches; give them a moment.
    let out = "";
    for (let i = 0; i < 40 && !out.includes("greeting logged"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      out = runNode([bin, "logs", "greeter", "--job", jobId]).stdout;
    }
    expect(out).toContain("greeting logged");
    expect(out).toContain(jobId);
    expect(out).not.toContain("greeting curl");
    const all = runNode([bin, "logs", "greeter"]).stdout;
    expect(all).toContain("greeting curl");
    const unknown = runNode([bin, "logs", "nope"]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('No endpoint "nope"');
  });

  it("is the service of every command run in the project: app and environment commands too", () => {
    // No SVC_API_KEY or SVC_API_URL anywhere: the session's service and key are used.
    const apps = runNode([bin, "app", "list", "--json"]);
    expect(apps.stderr).not.toContain("SVC_API_KEY");
    expect(apps.status).toBe(0);
    // The session's own app is listed, with its "dev" environment and the build it runs.
    const listed = JSON.parse(apps.stdout) as { apps: Array<{ name: string; environments: string[] }> };
    expect(listed.apps.length).toBe(1);
    expect(listed.apps[0]!.environments).toEqual(["dev"]);
    const app = runNode([bin, "app", "get", listed.apps[0]!.name, "--json"]);
    expect(app.status).toBe(0);
    const env = (JSON.parse(app.stdout) as { environments: Array<{ env: string; build: string; endpoints: Array<{ name: string }> }> }).environments[0]!;
    expect(env.env).toBe("dev");
    expect(env.build).toMatch(/^[0-9a-f]{64}$/);
    expect(env.endpoints.map((e) => e.name)).toContain("greeter");
    const plan = runNode([bin, "deploy", "--env", "dev", "--dry-run", "--json"]);
    expect(plan.status, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({ env: "dev", dryRun: true });
    const planned = runNode([bin, "deploy", "--env", "dev", "--dry-run"]);
    expect(planned.stderr).toContain(`service: ${ready.url} (the svc dev session of this project)`);
  });

  it("svc deploy to another environment never lands in the dev session: with nothing configured it refuses, naming --env dev", () => {
    const refused = runNode([bin, "deploy", "--env", "prod", "--yes"], { CI: "true", SVC_API_KEY: "" });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('No service to use for environment "prod"');
    expect(refused.stderr).toContain("pass --env dev to use the dev session");
    const apps = JSON.parse(runNode([bin, "app", "list", "--json"]).stdout) as { apps: Array<{ environments: string[] }> };
    expect(apps.apps[0]!.environments).toEqual(["dev"]);
  });

  it("with a stored profile, svc deploy --env prod goes to the profile's service, and scripts call through it", async () => {
    const other = await startTestService();
    try {
      const config = join(work, "profiles");
      mkdirSync(config, { recursive: true });
      writeFileSync(
        join(config, "profiles.json"),
        JSON.stringify({ current: "default", profiles: { default: { url: other.service.url, apiKey: other.key, savedAt: Date.now() } } }),
      );
      const deployed = await runNodeAsync([bin, "deploy", "--env", "prod", "--yes", "--detach"], { CI: "true", SVC_API_KEY: "", SVC_CONFIG_DIR: config });
      expect(deployed.status, deployed.stderr).toBe(0);
      expect(deployed.stderr).toContain(`service: ${other.service.url} (profile "default")`);
      const app = (await callService(`${other.service.url}/v1/apps`, { key: other.key })).body as { apps: Array<{ environments: string[] }> };
      expect(app.apps.map((a) => a.environments)).toEqual([["prod"]]);
      // The dev session was left alone.
      const session = JSON.parse(runNode([bin, "app", "list", "--json"]).stdout) as { apps: Array<{ environments: string[] }> };
      expect(session.apps[0]!.environments).toEqual(["dev"]);
      // A script reads the stored profile too: one pointing at a closed port is where it goes (and says so in a
      // line with its hint), unless SVC_ENV names the session's environment.
      const closed = await new Promise<number>((resolve) => {
        const probe = createServer().listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as AddressInfo;
          probe.close(() => resolve(port));
        });
      });
      writeFileSync(
        join(config, "profiles.json"),
        JSON.stringify({ current: "default", profiles: { default: { url: `http://127.0.0.1:${closed}`, apiKey: other.key, savedAt: Date.now() } } }),
      );
      const viaProfile = runNode(["scripts/call.mjs", "profile"], { SVC_CONFIG_DIR: config, SVC_API_KEY: "" });
      expect(viaProfile.status).toBe(1);
      expect(viaProfile.stderr).toContain(`Cannot reach the svc service at http://127.0.0.1:${closed}`);
      const viaSession = runNode(["scripts/call.mjs", "session"], { SVC_CONFIG_DIR: config, SVC_ENV: "dev", SVC_API_KEY: "" });
      expect(viaSession.status, viaSession.stderr).toBe(0);
      expect(JSON.parse(viaSession.stdout).result).toEqual({ message: "hello session" });
    } finally {
      await other.close();
    }
  }, 240_000);

  it("rebuilds on a source change and replaces workers without losing queued jobs", async () => {
    const slowUrl = endpoint("slowpoke").url;
    const queued: string[] = [];
    for (let i = 0; i < 5; i++) queued.push((await call(`${slowUrl}/run`, { body: { input: { ms: 150 } } })).body.id as string);
    const file = join(project, "src", "echo.mjs");
    writeFileSync(file, readFileSync(file, "utf8").replace("`hello ${input.who}`", "`bonjour ${input.who}`"));
    let message = "";
    for (let i = 0; i < 100 && message !== "bonjour again"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      message = (await call(`${endpoint("greeter").url}/runsync`, { body: { input: { who: "again" } } })).body.output?.message;
    }
    expect(message).toBe("bonjour again");
    expect(stderr).toMatch(/rebuilding/);
    for (const id of queued) {
      const rec = await call(`${slowUrl}/status-sync/${id}?wait=30000`, { method: "GET" });
      expect(rec.body.status).toBe("COMPLETED");
      expect(rec.body.output).toEqual({ slept: 150 });
    }
  }, 60_000);

  it("svc deploy --env dev deploys into the dev session, and its curl answers as pasted", () => {
    const deployed = runNode([bin, "deploy", "--env", "dev", "--yes"], { CI: "true", SVC_API_KEY: "" });
    expect(deployed.status, deployed.stderr).toBe(0);
    expect(deployed.stderr).toContain(`service: ${ready.url} (the svc dev session of this project)`);
    const curl = deployed.stdout
      .split("\n")
      .find((l) => l.trim().startsWith("curl "))!
      .trim();
    expect(curl).not.toContain("$SVC_API_KEY");
    // The shell it was printed in has no SVC_API_KEY: the command must work as it is.
    const env = { ...process.env };
    delete env.SVC_API_KEY;
    const answer = spawnSync("bash", ["-c", curl], { env, encoding: "utf8", timeout: 60_000 });
    expect(JSON.parse(answer.stdout)).toMatchObject({ status: "COMPLETED" });
  });

  it("stops on SIGINT, removing its session file and its workers", async () => {
    const sessionFile = join(project, ".svc", "dev-session.json");
    expect(existsSync(sessionFile)).toBe(true);
    const exited = new Promise<number | null>((r) => dev.on("exit", (code) => r(code)));
    dev.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(existsSync(sessionFile)).toBe(false);
    // No worker process of this session is left.
    await new Promise((r) => setTimeout(r, 200));
    expect(workersOf(work)).toEqual([]);
  }, 30_000);
});
