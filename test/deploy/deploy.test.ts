// End to end: the `svc` binary deploys a fixture app to a running `svc server` (spawned, its own data dir):
// queue, streaming, class and load-balanced endpoints and a function calling another endpoint. Deploy, call
// each, redeploy unchanged (same worker), change a source file (rolling release), a second environment,
// removal, and the error cases with their exit codes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { processWorkerPids } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "deploy-e2e-admin-key";

interface DeployJson {
  app: string;
  env: string;
  dryRun: boolean;
  createdEnvironment: boolean;
  build: { id: string; size: number; fingerprint: string; uploaded: boolean; onService: boolean };
  endpoints: Array<{ name: string; id: string; url: string; type: string; action: string; routes: string[]; curl: string }>;
  removed: Array<{ name: string; id: string }>;
  curl: string | null;
}

let work: string;
let project: string;
const servers: ChildProcess[] = [];
let url: string;
let smallUrl: string;
const everyEndpointId = new Set<string>();

async function startServer(dataDir: string, extraEnv: Record<string, string> = {}, workers = "process"): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY, ...extraEnv };
  delete env.SVC_API_URL;
  const child = spawn(process.execPath, [bin, "server", "--port", "0", "--data-dir", dataDir, "--workers", workers], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  servers.push(child);
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d.toString()));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 30_000);
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d.toString();
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) {
        clearTimeout(timer);
        resolve(line[1]!);
      }
    });
    child.on("exit", (code) => reject(new Error(`svc server exited ${code}:\n${stderr}`)));
  });
}

function svc(args: string[], env: Record<string, string | undefined> = {}) {
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const merged = { ...base, SVC_API_URL: url, SVC_API_KEY: KEY, ...env };
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: project, env: merged as NodeJS.ProcessEnv, encoding: "utf8", timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function deployJson(args: string[] = []): DeployJson {
  const r = svc(["deploy", "--json", ...args]);
  if (r.status !== 0) throw new Error(`svc deploy ${args.join(" ")} exited ${r.status}:\n${r.stderr}`);
  const parsed = JSON.parse(r.stdout) as DeployJson;
  for (const e of parsed.endpoints) everyEndpointId.add(e.id);
  return parsed;
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${path.startsWith("http") ? "" : url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Record<string, any> };
}

const endpointOf = (d: DeployJson, name: string) => {
  const e = d.endpoints.find((x) => x.name === name);
  if (!e) throw new Error(`no endpoint ${name}`);
  return e;
};
const runsync = async (d: DeployJson, name: string, input: unknown, fn?: string) =>
  (await api("POST", `${endpointOf(d, name).url}/runsync`, { input, ...(fn ? { function: fn } : {}) })).body;

async function waitFinal(endpointUrl: string, id: string, timeoutMs = 60_000): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api("GET", `${endpointUrl}/status/${id}`);
    if (["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(body.status)) return body;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${body.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function runScript(script: string, env: Record<string, string>) {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  return spawnSync(process.execPath, [script, "e2e"], { cwd: project, env: { ...base, ...env }, encoding: "utf8", timeout: 60_000 });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-deploy-e2e-"));
  project = join(work, "deploy-app");
  cpSync(join(repo, "fixtures", "deploy-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  [url, smallUrl] = await Promise.all([
    startServer(join(work, "data")),
    // A service that accepts artifacts of at most 1000 bytes, and starts no workers.
    startServer(join(work, "small-data"), { SVC_MAX_ARTIFACT_BYTES: "1000" }, "none"),
  ]);
}, 60_000);

afterAll(async () => {
  for (const child of servers) {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await new Promise((r) => {
        const t = setTimeout(() => {
          child.kill("SIGKILL");
          r(undefined);
        }, 10_000);
        child.once("exit", () => {
          clearTimeout(t);
          r(undefined);
        });
      });
    }
  }
  rmSync(work, { recursive: true, force: true });
});

describe("svc deploy against a running svc server", () => {
  let production: DeployJson;
  let deployedBuild = "";

  it("an app or environment name the service would refuse is wrong usage (exit 2) before the build, dry run or not", async () => {
    for (const dryRun of [["--dry-run"], []]) {
      const app = svc(["deploy", "--app", "Bad Name!", "--env", "x", ...dryRun]);
      expect(app.status).toBe(2);
      expect(app.stderr).toContain(
        'Invalid app name "Bad Name!": app names are 1-63 characters: lowercase letters, digits, ".", "_", "-", starting with a letter or digit',
      );
      expect(app.stderr).toContain("--app");
      expect(app.stderr).not.toContain("Discovering endpoints");
      const env = svc(["deploy", "--env", "Prod", ...dryRun]);
      expect(env.status).toBe(2);
      expect(env.stderr).toContain('Invalid environment name "Prod": environment names are 1-63 characters');
      expect(env.stderr).not.toContain("Discovering endpoints");
    }
    expect((await api("GET", "/v1/apps")).body.apps).toEqual([]);
  });

  it("--dry-run prints the plan and creates nothing", async () => {
    const r = svc(["deploy", "--dry-run"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("dry run");
    // It never uploads, and says so (the service has no app yet, so not this build either).
    expect(r.stdout).toContain("(dry run: not uploaded,");
    expect(r.stdout).not.toContain("already on the service");
    expect(r.stdout).toMatch(/\+ worker\s+queue\s+would be created/);
    expect((await api("GET", "/v1/apps/deploy-app")).status).toBe(404);
  });

  it("deploys every endpoint to `production` and prints URLs, routes and a curl (--json)", async () => {
    production = deployJson();
    expect(production).toMatchObject({ app: "deploy-app", env: "production", dryRun: false, createdEnvironment: true });
    expect(production.build.uploaded).toBe(true);
    expect(production.build.id).toMatch(/^[a-f0-9]{64}$/);
    expect(production.endpoints.map((e) => [e.name, e.type, e.action])).toEqual([
      ["api", "lb", "create"],
      ["caller", "queue", "create"],
      ["embedder", "queue", "create"],
      ["streamer", "queue", "create"],
      ["worker", "queue", "create"],
    ]);
    expect(endpointOf(production, "api").routes).toEqual(["GET /status", "POST /process"]);
    for (const e of production.endpoints) expect(e.url).toBe(e.type === "lb" ? `${url}/lb/${e.id}` : `${url}/v2/${e.id}`);
    expect(production.curl).toContain('-H "Authorization: Bearer $SVC_API_KEY"');
    expect(production.curl).toMatch(/^curl -s -X POST http:\/\/127\.0\.0\.1:\d+\/v2\/[a-f0-9]+\/runsync /);
    // The service is the truth: the environment lists the same endpoints (the LB one with its routes).
    const state = await api("GET", "/v1/apps/deploy-app/environments/production");
    expect(state.status).toBe(200);
    expect(state.body.build).toBe(production.build.id);
    expect(state.body.endpoints.find((e: { name: string }) => e.name === "api").routes).toEqual(["GET /status", "POST /process"]);
  });

  it("serves each kind of endpoint; workers get SVC_APP, SVC_ENV, the endpoint name and the user's env", async () => {
    const worker = await runsync(production, "worker", { tag: "direct" }, "work");
    expect(worker.status).toBe("COMPLETED");
    expect(worker.output).toMatchObject({ version: "v1", tag: "direct", app: "deploy-app", env: "production", endpoint: "worker", greeting: "hello" });

    const streamJob = await api("POST", `${endpointOf(production, "streamer").url}/run`, { input: { to: 3 } });
    const final = await waitFinal(endpointOf(production, "streamer").url, streamJob.body.id);
    expect(final.status).toBe("COMPLETED");
    const streamed = await api("GET", `${endpointOf(production, "streamer").url}/stream/${streamJob.body.id}`);
    expect(streamed.body.stream.map((c: { output: { n: number } }) => c.output.n)).toEqual([1, 2, 3]);

    const first = await runsync(production, "embedder", { text: "abc" });
    const second = await runsync(production, "embedder", { text: "hello" });
    expect(first.output).toEqual({ length: 3, calls: 1 });
    expect(second.output).toEqual({ length: 5, calls: 2 });

    // Load-balanced: served at its own address; it has no job API.
    const lbEndpoint = endpointOf(production, "api");
    const lb = await api("POST", `/v2/${lbEndpoint.id}/runsync`, { input: {} });
    expect(lb.status).toBe(400);
    const doubled = await api("POST", `${lbEndpoint.url}/process`, { n: 21 });
    expect(doubled.status).toBe(200);
    expect(doubled.body).toEqual({ doubled: 42 });
  });

  it("svc logs takes a deployed endpoint by name: the project's app and its only environment", () => {
    const r = svc(["logs", "embedder", "--json"]);
    expect(r.stderr).not.toContain("No endpoint");
    expect(r.status).toBe(0);
    const ids = new Set(
      r.stdout
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { endpointId?: string }).endpointId),
    );
    for (const id of ids) expect(id).toBe(endpointOf(production, "embedder").id);
  });

  it("a function of one endpoint calls another endpoint's function; the callee's failure carries its job id", async () => {
    const relayed = await runsync(production, "caller", { tag: "relayed" }, "relay");
    expect(relayed.status).toBe("COMPLETED");
    expect(relayed.output.via).toBe("caller");
    expect(relayed.output.result).toMatchObject({ version: "v1", tag: "relayed", endpoint: "worker", env: "production" });

    const failed = await runsync(production, "caller", { message: "boom from worker" }, "relayFailure");
    expect(failed.status).toBe("COMPLETED");
    const caught = failed.output.caught;
    expect(caught).toMatchObject({ name: "JobFailedError", status: "FAILED", endpoint: "worker" });
    expect(caught.message).toContain("boom from worker");
    const remote = await api("GET", `${endpointOf(production, "worker").url}/status/${caught.jobId}`);
    expect(remote.body).toMatchObject({ id: caught.jobId, status: "FAILED", error: expect.stringContaining("boom from worker") });
  });

  it("a script calls deployed functions through SVC_APP/SVC_ENV; without a context it fails clearly", () => {
    const ok = runScript("scripts/call.mjs", { SVC_APP: "deploy-app", SVC_ENV: "production", SVC_API_URL: url, SVC_API_KEY: KEY });
    expect(ok.stderr).toBe("");
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ version: "v1", tag: "e2e", env: "production" });

    const none = runScript("scripts/call.mjs", {});
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('NoContextError: Cannot call endpoint "worker": there is no svc context');
    expect(none.stderr).toContain("svc dev");
    expect(none.stderr).toContain("SVC_APP and SVC_ENV");
  });

  it("lifecycle calls from the SDK throw a usage error naming the svc command", () => {
    const r = runScript("scripts/lifecycle.mjs", {});
    expect(r.status).toBe(0);
    const [deployCall, deleteCall] = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(deployCall).toMatchObject({ name: "UsageError", exitCode: 2 });
    expect(deployCall.hint).toContain("svc deploy --env");
    expect(deleteCall.hint).toContain("svc env delete");
  });

  it("redeploying unchanged sources restarts nothing (same worker)", async () => {
    const before = (await runsync(production, "worker", {}, "work")).output.workerId;
    expect(before).toMatch(/\S+/);
    const dry = svc(["deploy", "--dry-run"]);
    expect(dry.status).toBe(0);
    expect(dry.stdout).toContain("(dry run: already on the service)");
    const again = deployJson();
    expect(again.endpoints.every((e) => e.action === "unchanged")).toBe(true);
    expect(again.build.uploaded).toBe(false);
    expect(again.build.onService).toBe(true);
    expect(again.endpoints.map((e) => e.id)).toEqual(production.endpoints.map((e) => e.id));
    const after = (await runsync(production, "worker", {}, "work")).output.workerId;
    expect(after).toBe(before);
  });

  it("a changed source file rolls out: queued and running jobs complete, new code answers", async () => {
    const workerUrl = endpointOf(production, "worker").url;
    const oldWorker = (await runsync(production, "worker", {}, "work")).output.workerId;
    const jobs: string[] = [];
    for (let i = 0; i < 4; i++) jobs.push((await api("POST", `${workerUrl}/run`, { input: { ms: 400, tag: `queued-${i}` }, function: "work" })).body.id);

    const file = join(project, "src", "work.mjs");
    writeFileSync(file, readFileSync(file, "utf8").replace('const VERSION = "v1";', 'const VERSION = "v2";'));
    const rolled = deployJson();
    expect(endpointOf(rolled, "worker").action).toBe("update");
    expect(endpointOf(rolled, "worker").id).toBe(endpointOf(production, "worker").id);
    expect(rolled.build.fingerprint).not.toBe(production.build.fingerprint);
    deployedBuild = rolled.build.id;

    const finals = await Promise.all(jobs.map((id) => waitFinal(workerUrl, id)));
    expect(finals.map((f) => f.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(finals.map((f) => f.output.tag)).toEqual(["queued-0", "queued-1", "queued-2", "queued-3"]);

    const fresh = await runsync(production, "worker", { tag: "new" }, "work");
    expect(fresh.output.version).toBe("v2");
    expect(fresh.output.workerId).not.toBe(oldWorker);
  });

  it("svc update applies configuration from the code without a new build", async () => {
    const file = join(project, "src", "embedder.ts");
    writeFileSync(file, readFileSync(file, "utf8").replace('name: "embedder", workers: [0, 1]', 'name: "embedder", workers: [0, 2]'));
    const r = svc(["update", "--env", "production", "--json"]);
    // Under --json stderr stays free for an error's one JSON object: not even the line naming the service.
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).changes).toEqual([{ name: "embedder", id: endpointOf(production, "embedder").id, changed: ["workersMax"], restart: true }]);
    const state = await api("GET", "/v1/apps/deploy-app/environments/production");
    expect(state.body.endpoints.find((e: { name: string }) => e.name === "embedder").workersMax).toBe(2);
    expect(state.body.build).toBe(deployedBuild);
    expect((await runsync(production, "embedder", { text: "x" })).status).toBe("COMPLETED");
  });

  let staging: DeployJson;
  it("deploys a second environment, isolated from the first", async () => {
    staging = deployJson(["--env", "staging"]);
    expect(staging).toMatchObject({ env: "staging", createdEnvironment: true });
    const stagingIds = staging.endpoints.map((e) => e.id);
    for (const id of production.endpoints.map((e) => e.id)) expect(stagingIds).not.toContain(id);
    const relayed = await runsync(staging, "caller", { tag: "staged" }, "relay");
    expect(relayed.output.result).toMatchObject({ env: "staging", version: "v2" });
    expect((await runsync(production, "worker", {}, "work")).output.env).toBe("production");
  });

  it("without --env, several environments are an error that lists them (exit 2)", () => {
    const r = svc(["deploy"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("production, staging");
    expect(r.stderr).toContain("--env");
    const logs = svc(["logs", "embedder"]);
    expect(logs.status).toBe(2);
    expect(logs.stderr).toContain("`svc logs --env production`");
    expect(svc(["logs", "embedder", "--env", "staging"]).status).toBe(0);
  });

  it("removing an endpoint needs --yes without a terminal, and the plan names it first", async () => {
    rmSync(join(project, "src", "stream.ts"));
    const refused = svc(["deploy", "--env", "staging"]);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain("streamer");
    expect(refused.stderr).toContain("--yes");
    expect((await api("GET", "/v1/apps/deploy-app/environments/staging")).body.endpoints.map((e: { name: string }) => e.name)).toContain("streamer");

    const dry = svc(["deploy", "--env", "staging", "--dry-run"]);
    expect(dry.stdout).toMatch(/- streamer\s+would be removed/);
    // The refused deploy stopped before storing or uploading anything: the service does not have the new build.
    expect(refused.stderr).not.toContain("Uploading");
    expect(dry.stdout).toContain("(dry run: not uploaded");

    const done = deployJson(["--env", "staging", "--yes"]);
    expect(done.removed.map((r) => r.name)).toEqual(["streamer"]);
    expect((await api("GET", `${endpointOf(staging, "streamer").url}/health`)).status).toBe(404);
  });

  it("undeploy, env delete and app delete remove every endpoint and stop every worker", async () => {
    expect(processWorkerPids(join(work, "data")).length).toBeGreaterThan(0);
    const one = svc(["undeploy", "worker", "--env", "staging", "--yes", "--json"]);
    expect(one.status).toBe(0);
    expect(JSON.parse(one.stdout).removed.map((r: { name: string }) => r.name)).toEqual(["worker"]);

    const all = svc(["undeploy", "--all", "--env", "staging", "--yes"]);
    expect(all.status).toBe(0);
    expect(all.stdout).toContain("Removed from deploy-app/staging");
    const envDelete = svc(["env", "delete", "production", "--yes", "--json"]);
    expect(envDelete.status).toBe(0);
    expect(JSON.parse(envDelete.stdout).removed.length).toBe(5);
    const appDelete = svc(["app", "delete", "deploy-app", "--yes"]);
    expect(appDelete.status).toBe(0);

    expect((await api("GET", "/v1/apps")).body.apps).toEqual([]);
    for (const id of everyEndpointId) expect((await api("GET", `/v2/${id}/health`)).status).toBe(404);
    // Success was reported only once the workers had exited.
    expect(processWorkerPids(join(work, "data"))).toEqual([]);
  });
});

describe("svc deploy errors", () => {
  it("no API key: exit 1, names SVC_API_KEY", () => {
    const r = svc(["deploy", "--env", "x"], { SVC_API_KEY: undefined });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("SVC_API_KEY");
  });

  it("a wrong key: the service's 401, exit 3", () => {
    const r = svc(["deploy", "--env", "x"], { SVC_API_KEY: "not-a-key" });
    expect(r.status).toBe(3);
    expect(r.stderr).toContain("401 Unauthorized");
  });

  it("a wrong service URL: exit 4, names SVC_API_URL", () => {
    const r = svc(["deploy", "--env", "x"], { SVC_API_URL: "http://127.0.0.1:9" });
    expect(r.status).toBe(4);
    expect(r.stderr).toContain("Cannot reach the svc service at http://127.0.0.1:9");
    expect(r.stderr).toContain("SVC_API_URL");
  });

  it("an artifact over the service's limit is refused (413, exit 3) and nothing is deployed", async () => {
    const r = svc(["deploy", "--env", "big"], { SVC_API_URL: smallUrl });
    expect(r.status).toBe(3);
    expect(r.stderr).toContain("413 Payload Too Large");
    expect(r.stderr).toContain("limit is 1000 bytes");
    const envs = await fetch(`${smallUrl}/v1/apps/deploy-app/environments/big`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(((await envs.json()) as { endpoints: unknown[] }).endpoints).toEqual([]);
  });
});
