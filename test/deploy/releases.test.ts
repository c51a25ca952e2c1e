// Releases through the `svc` binary against a real `svc server` with process workers: a build whose module
// throws at import never replaces the one that serves (deploy exits 1 with the error and its file:line); a
// two-endpoint release with one broken endpoint switches neither; a load-balanced endpoint whose /ping never
// becomes ready is refused the same way; `svc rollback` brings the previous build back; /health, the endpoint
// record and `svc env get` tell what failed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "releases-e2e-admin-key";
/** A new worker that has not come up after this long counts as failed; two attempts per endpoint. */
const START_TIMEOUT_MS = 6000;

let work: string;
let project: string;
let server: ServerProcess;

function cliEnv(): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  return { ...base, SVC_API_URL: server.url, SVC_API_KEY: KEY };
}

function svc(args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: project, env: cliEnv(), encoding: "utf8", timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The same, without blocking this process (jobs are submitted while it runs). */
function svcAsync(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [bin, ...args], { cwd: project, env: cliEnv() });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("exit", (status) => resolve({ status, stdout, stderr })));
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${path.startsWith("http") ? "" : server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Record<string, any> };
}

function setSource(file: string, version: string, broken: "" | "throw" | "hang" = "") {
  const path = join(project, "src", file);
  let text = readFileSync(join(repo, "fixtures", "release-app", "src", file), "utf8").replace('const VERSION = "v1";', `const VERSION = "${version}";`);
  if (broken === "throw") text = text.replace("const VERSION", 'if (!process.env.GREETING_KEY) throw new Error("GREETING_KEY is not set");\nconst VERSION');
  if (broken === "hang") text = text.replace("const VERSION", "await new Promise(() => undefined);\nconst VERSION");
  writeFileSync(path, text);
}

async function environment() {
  return (await api("GET", "/v1/apps/release-app/environments/prod")).body;
}

async function endpointId(name: string): Promise<string> {
  const e = (await environment()).endpoints.find((x: { name: string }) => x.name === name);
  if (!e) throw new Error(`no endpoint ${name}`);
  return e.id;
}

async function runsync(name: string, input: unknown) {
  return (await api("POST", `/v2/${await endpointId(name)}/runsync`, { input })).body;
}

async function waitFinal(id: string, jobId: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { body } = await api("GET", `/v2/${id}/status/${jobId}`);
    if (["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(body.status)) return body;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${body.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-releases-"));
  project = join(work, "release-app");
  cpSync(join(repo, "fixtures", "release-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  server = await startServerProcess({
    dataDir: join(work, "data"),
    env: { SVC_API_KEY: KEY, SVC_RELEASE_START_TIMEOUT_MS: String(START_TIMEOUT_MS), SVC_RELEASE_ATTEMPTS: "2" },
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("releases: a build that cannot start never takes an endpoint down", () => {
  it("deploys the first build: every endpoint's first worker comes up before the deploy returns", async () => {
    const r = svc(["deploy", "--env", "prod", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.release.state).toBe("live");
    expect(result.release.endpoints.map((e: { name: string }) => e.name).sort()).toEqual(["echo", "greet", "web"]);
    expect(result.release.endpoints.every((e: { state: string }) => e.state === "ready")).toBe(true);
    expect(await runsync("greet", { name: "ada" })).toMatchObject({ status: "COMPLETED", output: { hello: "ada", version: "v1" } });
  }, 90_000);

  it("a module that throws at import: exit 1 with the error and its file:line, the old code keeps answering, no job lost", async () => {
    setSource("greet.ts", "v2", "throw");
    const greetId = await endpointId("greet");
    const deploying = svcAsync(["deploy", "--env", "prod"]);
    // Jobs submitted while the new workers try to start are served by the old ones.
    const submitted: string[] = [];
    for (let i = 0; i < 5; i++) {
      submitted.push((await api("POST", `/v2/${greetId}/run`, { input: { name: `job${i}` } })).body.id);
      await new Promise((r) => setTimeout(r, 200));
    }
    const r = await deploying;
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('endpoint "greet" could not start its new workers');
    expect(r.stderr).toContain("GREETING_KEY is not set");
    expect(r.stderr).toMatch(/src\/greet\.ts:4:\d+/);
    expect(r.stderr).toContain("the previous build");
    expect(r.stderr).toContain("is still serving");
    expect(r.stdout).not.toContain("Deployed");
    for (const id of submitted) expect(await waitFinal(greetId, id)).toMatchObject({ status: "COMPLETED", output: { version: "v1" } });
    expect(await runsync("greet", { name: "bob" })).toMatchObject({ status: "COMPLETED", output: { version: "v1" } });

    const env = await environment();
    expect(env.releases[0]).toMatchObject({ state: "failed", kind: "deploy", error: { endpoint: "greet" } });
    expect(env.releases[0].error.message).toContain("GREETING_KEY is not set");
    expect(env.releases[0].endpoints.find((e: { name: string }) => e.name === "greet")).toMatchObject({ state: "failed", attempts: 2, failures: 2 });
    expect(env.build).toBe(env.releases[1].buildId);

    // /health and the endpoint's record say what is wrong.
    const health = (await api("GET", `/v2/${greetId}/health`)).body;
    expect(health.workers.unhealthy).toBeGreaterThanOrEqual(2);
    expect(health.lastStartError.message).toContain("GREETING_KEY is not set");
    const record = (await api("GET", `/v1/endpoints/${greetId}`)).body;
    expect(record.unhealthyWorkers).toBeGreaterThanOrEqual(2);
    expect(record.lastStartError.message).toContain("GREETING_KEY is not set");
    const get = svc(["env", "get", "prod"]);
    expect(get.status).toBe(0);
    expect(get.stdout).toMatch(/deploy\s+failed: greet: .*GREETING_KEY is not set/);
    expect(get.stdout).toMatch(/greet .*\n.*worker\(s\) failed to start recently/);
    // The start failures are in the endpoint's logs like any line.
    const logs = svc(["logs", "greet", "--env", "prod"]);
    expect(logs.stdout + logs.stderr).toContain("GREETING_KEY is not set");
  }, 120_000);

  it("a two-endpoint release where only one endpoint is broken switches neither", async () => {
    setSource("greet.ts", "v2");
    setSource("echo.ts", "v2", "throw");
    const r = svc(["deploy", "--env", "prod"]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('endpoint "echo" could not start');
    expect(await runsync("greet", { name: "c" })).toMatchObject({ output: { version: "v1" } });
    expect(await runsync("echo", { text: "c" })).toMatchObject({ output: { version: "v1" } });
    const env = await environment();
    expect(env.releases[0].endpoints.find((e: { name: string }) => e.name === "greet").state).toBe("ready");
  }, 120_000);

  it("a load-balanced endpoint whose /ping never answers 200 is refused after its start timeout; the old one serves", async () => {
    setSource("echo.ts", "v1");
    setSource("greet.ts", "v1");
    setSource("web.ts", "v2", "hang");
    const started = Date.now();
    const r = svc(["deploy", "--env", "prod"]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('endpoint "web" could not start');
    expect(r.stderr).toContain("had not answered /ping with 200 after 6 s");
    expect(Date.now() - started).toBeGreaterThanOrEqual(2 * START_TIMEOUT_MS);
    const web = (await environment()).endpoints.find((x: { name: string }) => x.name === "web");
    const hello = await fetch(`${web.url}/hello`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(hello.status).toBe(200);
    expect(await hello.json()).toEqual({ version: "v1" });
  }, 120_000);

  it("fixed: the new code serves; then `svc rollback` brings the previous build back", async () => {
    setSource("greet.ts", "v3");
    setSource("web.ts", "v3");
    const good = svc(["deploy", "--env", "prod"]);
    expect(good.status, good.stderr).toBe(0);
    expect(good.stdout).toContain("New workers started for");
    expect(await runsync("greet", { name: "d" })).toMatchObject({ output: { version: "v3" } });
    const rolled = svc(["rollback", "--env", "prod", "--json"]);
    expect(rolled.status, rolled.stderr).toBe(0);
    const result = JSON.parse(rolled.stdout);
    expect(result.release).toMatchObject({ kind: "rollback", state: "live" });
    expect(await runsync("greet", { name: "e" })).toMatchObject({ output: { version: "v1" } });
    const web = (await environment()).endpoints.find((x: { name: string }) => x.name === "web");
    expect(await (await fetch(`${web.url}/hello`, { headers: { authorization: `Bearer ${KEY}` } })).json()).toEqual({ version: "v1" });
    const get = svc(["env", "get", "prod"]);
    expect(get.stdout).toMatch(/rollback\s+live/);
    // One live release an environment: the ones that went live before it are replaced.
    expect(get.stdout.match(/\slive\b/g)).toHaveLength(1);
    expect(get.stdout).toMatch(/deploy\s+replaced/);
  }, 120_000);

  it("--detach returns once the release began; its outcome shows in the environment's releases", async () => {
    setSource("greet.ts", "v4");
    const r = svc(["deploy", "--env", "prod", "--detach", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.release.state).toBe("starting");
    const deadline = Date.now() + 30_000;
    for (;;) {
      const release = (await environment()).releases.find((x: { id: string }) => x.id === result.release.id);
      if (release.state === "live") break;
      if (Date.now() > deadline) throw new Error(`release still ${release.state}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    expect(await runsync("greet", { name: "f" })).toMatchObject({ output: { version: "v4" } });
  }, 90_000);
});
