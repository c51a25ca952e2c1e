// End to end: `svc server --workers docker` (the real binary) with `svc deploy` of fixtures/preview-app: a
// queue-based function and a load-balanced route each answer from a worker container started from zero, and
// SIGINT stops the server with no container or network of the app left. The app name is unique per run so the
// engine's objects can be found by label.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "server-docker-admin-key";
const app = `server-docker-${Date.now().toString(36)}`;

let work: string;
let project: string;
let server: ChildProcessWithoutNullStreams | undefined;
let serverExit: Promise<number | null>;
let url: string;
let stderr = "";
let endpoints: Array<{ name: string; id: string; url: string; type: string }> = [];
let cliEnv: NodeJS.ProcessEnv = {};

const appObjects = async () => {
  const filters = { label: [`${LABELS.app}=${app}`] };
  const [containers, networks, volumes] = await Promise.all([
    docker.listContainers({ all: true, filters }),
    docker.listNetworks({ filters }),
    docker.listVolumes({ filters }),
  ]);
  return { containers: containers.map((c) => c.Id), networks: networks.map((n) => n.Name), volumes: (volumes.Volumes ?? []).map((v) => v.Name) };
};

beforeAll(async () => {
  if (!engineUp) return;
  work = mkdtempSync(join(tmpdir(), "svc-server-docker-"));
  project = join(work, "app");
  cpSync(join(repo, "fixtures", "preview-app"), project, { recursive: true });
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: KEY, CI: "true" };
  delete env.SVC_API_URL;
  server = spawn(process.execPath, [bin, "server", "--workers", "docker", "--port", "0", "--data-dir", join(work, "data")], { env });
  server.stderr.on("data", (d) => (stderr += d.toString()));
  serverExit = new Promise((resolve) => server!.on("exit", (code) => resolve(code)));
  url = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 60_000);
    server!.stdout.on("data", (d) => {
      stdout += d.toString();
      const line = stdout.split("\n")[0];
      if (stdout.includes("\n") && line) {
        clearTimeout(timer);
        resolve(line.trim());
      }
    });
    void serverExit.then((code) => reject(new Error(`svc server exited ${code}:\n${stderr}`)));
  });
  cliEnv = { ...env, SVC_API_URL: url };
  const deployed = spawnSync(process.execPath, [bin, "deploy", "--env", "test", "--json", "-C", project], {
    env: cliEnv,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (deployed.status !== 0) throw new Error(`svc deploy failed (${deployed.status}):\n${deployed.stderr}`);
  endpoints = (JSON.parse(deployed.stdout) as { endpoints: typeof endpoints }).endpoints;
}, 180_000);

afterAll(async () => {
  if (server && server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
  if (engineUp) {
    // The app's network volume outlives the server by design (persistent volumes): remove it here.
    await cleanupStale({ [LABELS.app]: app }, { docker }).catch(() => undefined);
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

describeDocker("svc server --workers docker", () => {
  const endpoint = (name: string) => endpoints.find((e) => e.name === name)!;
  const call = async (target: string, body?: unknown) => {
    const res = await fetch(target, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it("runs a deployed function in a worker container started from zero (/runsync)", async () => {
    const r = await call(`${endpoint("echo").url}/runsync?wait=90000`, { input: { text: "from the server" } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { echo: "from the server" } });
    const containers = await docker.listContainers({ filters: { label: [`${LABELS.app}=${app}`, `${LABELS.endpoint}=${endpoint("echo").id}`] } });
    expect(containers.map((c) => c.Id.slice(0, 12))).toContain(r.body.output.host);
  }, 120_000);

  it("serves a load-balanced route from a worker container through /lb", async () => {
    expect(endpoint("api").type).toBe("lb");
    const r = await call(`${endpoint("api").url}/items/9`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: "9" });
    const containers = await docker.listContainers({ filters: { label: [`${LABELS.app}=${app}`, `${LABELS.endpoint}=${endpoint("api").id}`] } });
    expect(containers.map((c) => c.Id.slice(0, 12))).toContain(r.body.host);
  }, 120_000);

  it("a release whose module throws at import fails with its error; the running worker containers keep serving", async () => {
    const file = join(project, "src", "echo.ts");
    const good = readFileSync(file, "utf8");
    writeFileSync(file, good.replace("// A queue-based", 'if (!process.env.ECHO_KEY) throw new Error("ECHO_KEY is not set");\n// A queue-based'));
    try {
      const r = spawnSync(process.execPath, [bin, "deploy", "--env", "test", "-C", project], { env: cliEnv, encoding: "utf8", timeout: 180_000 });
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/endpoint "(echo|relay)" could not start its new workers/);
      expect(r.stderr).toContain("ECHO_KEY is not set");
      expect(r.stderr).toMatch(/src\/echo\.ts:6:\d+/);
      const answer = await call(`${endpoint("echo").url}/runsync?wait=90000`, { input: { text: "still here" } });
      expect(answer.body).toMatchObject({ status: "COMPLETED", output: { echo: "still here" } });
    } finally {
      writeFileSync(file, good);
    }
  }, 240_000);

  it("SIGINT stops the server (exit 0) and removes its worker containers and network", async () => {
    expect((await appObjects()).containers.length).toBeGreaterThan(0);
    server!.kill("SIGINT");
    expect(await serverExit).toBe(0);
    const left = await appObjects();
    expect(left.containers).toEqual([]);
    expect(left.networks).toEqual([]);
  }, 60_000);
});
