// End to end, through the `svc` binary and a real Docker engine: fixtures/image-app mixes a TypeScript endpoint
// ("greeter") and an image endpoint (`Endpoint({ name: "echo-image", image })`, the provider worker image that
// test/docker/python-image.ts builds from this machine's Python). `svc build` writes the image in the manifest and
// bundles no code for it; `svc deploy` to `svc server --workers docker` serves both, and a new image tag is a new
// release of that endpoint alone; `svc deploy --preview` and `svc dev` serve both; `svc dev` without a Docker
// engine serves the TypeScript endpoint and says, for the image endpoint, what is missing and what to do.

import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { firstJsonOnStdout, SVC_BIN } from "../cli-output.js";
import { copyFixture } from "../fixture-project.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";
import { buildProviderWorkerImage } from "../docker/python-image.js";

const KEY = "image-app-admin-key";
const IMAGE = "svc-test-provider-worker:image-app";
const IMAGE_2 = "svc-test-provider-worker:image-app-2";
const run = Date.now().toString(36);
const app = `image-app-${run}`;
/** The label on the test image, so that it goes with the run's other objects. */
const session = `image-app-test-${run}`;

let work: string;
let project: string;
const children: ChildProcessWithoutNullStreams[] = [];

interface Listed {
  name: string;
  id: string;
  url: string;
  type: string;
  action?: string;
}

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  return { ...env, ...extra };
}

function svc(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [SVC_BIN, ...args], { cwd: project, env: cliEnv(env), encoding: "utf8", timeout: 240_000 });
}

/** A long-running command (server, preview, dev): its child, its stderr so far, and its exit. */
function start(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [SVC_BIN, ...args], { cwd: project, env: cliEnv(env) });
  children.push(child);
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, stderr: () => stderr, exit };
}

async function post(url: string, key: string, body: unknown) {
  const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function get(url: string, key: string) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const named = (endpoints: Listed[], name: string) => {
  const e = endpoints.find((x) => x.name === name);
  if (!e) throw new Error(`no endpoint ${name} in ${JSON.stringify(endpoints)}`);
  return e;
};

/** Both endpoints answer /runsync: greeter from svc's runtime, echo-image from a container of the image. */
async function bothAnswer(endpoints: Listed[], key: string): Promise<string> {
  const greeted = await post(`${named(endpoints, "greeter").url}/runsync`, key, { input: { name: "ada" } });
  expect(greeted.body).toMatchObject({ status: "COMPLETED", output: { hello: "ada" } });
  const echoed = await post(`${named(endpoints, "echo-image").url}/runsync`, key, { input: { mode: "echo", value: "hello" } });
  expect(echoed.body).toMatchObject({ status: "COMPLETED", output: { value: "hello" } });
  expect(echoed.body.output.worker).toMatch(/^w/);
  return echoed.body.output.worker as string;
}

/** The running containers of this run's app for an endpoint id. */
async function containersOf(endpointId: string) {
  return docker.listContainers({ filters: { label: [`${LABELS.app}=${app}`, `${LABELS.endpoint}=${endpointId}`] } });
}

async function stop(p: { child: ChildProcessWithoutNullStreams; exit: Promise<number | null> }) {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGINT");
  return p.exit;
}

/** Run `body` with a long-running command started; stopped (SIGINT, its own clean-up) whatever happens. */
async function withCommand<T>(p: ReturnType<typeof start>, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } finally {
    await stop(p);
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-image-app-"));
  project = copyFixture("image-app", work);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
  if (engineUp) {
    await buildProviderWorkerImage(docker, IMAGE, session);
    await docker.getImage(IMAGE).tag({ repo: "svc-test-provider-worker", tag: "image-app-2" });
  }
}, 240_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (engineUp) {
    await cleanupStale({ [LABELS.app]: app }, { docker }).catch(() => undefined);
    for (const tag of [IMAGE_2, IMAGE])
      await docker
        .getImage(tag)
        .remove({ force: true })
        .catch(() => undefined);
  }
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describeDocker("an app with an image endpoint, through the svc binary", () => {
  it("svc build writes the image endpoint in the manifest and bundles no code for it", () => {
    const built = svc(["build", "--json"]);
    expect(built.status, built.stderr).toBe(0);
    const summary = JSON.parse(built.stdout) as { endpoints: Array<{ name: string; image?: string; functions: string[] }> };
    expect(summary.endpoints.map((e) => [e.name, e.image ?? null, e.functions])).toEqual([
      ["echo-image", IMAGE, []],
      ["greeter", null, ["greet"]],
    ]);
    const manifest = JSON.parse(readFileSync(join(project, ".svc", "svc_manifest.json"), "utf8"));
    expect(manifest.resources["echo-image"]).toMatchObject({
      imageName: IMAGE,
      protocol: "provider",
      handler: "",
      functions: [],
      workersMax: 1,
      env: { GREETING: "hi" },
      shmSizeMb: 128,
      containerDiskInGb: 5,
    });
    expect(manifest.resources.greeter).toMatchObject({ handler: "endpoints/greeter/handler.mjs", functions: [{ name: "greet" }] });
    const text = svc(["build"]);
    expect(text.stdout).toContain(`image: ${IMAGE} (its container runs the jobs; no code bundled)`);
    const listing = spawnSync("tar", ["tzf", join(project, ".svc", "artifact.tar.gz")], { encoding: "utf8" })
      .stdout.split("\n")
      .filter(Boolean);
    expect(listing.filter((p) => p.includes("echo-image"))).toEqual([]);
    expect(listing).toContain("endpoints/greeter/handler.mjs");
  });

  it("svc deploy to svc server --workers docker: both answer; a new image tag is a new release of that endpoint alone", async () => {
    const server = start(["server", "--workers", "docker", "--port", "0", "--data-dir", join(work, "server-data")], { SVC_API_KEY: KEY });
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${server.stderr()}`)), 60_000);
      server.child.stdout.on("data", (d) => {
        out += d.toString();
        const line = /^(http:\/\/\S+)\n/.exec(out);
        if (line) {
          clearTimeout(timer);
          resolve(line[1]!);
        }
      });
    });
    const source = join(project, "src", "echo-image.ts");
    const original = readFileSync(source, "utf8");
    const deploy = () => {
      const r = svc(["deploy", "--json"], { SVC_API_URL: url, SVC_API_KEY: KEY });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { env: string; endpoints: Listed[] };
    };
    const first = deploy();
    expect(first.endpoints.map((e) => [e.name, e.type, e.action])).toEqual([
      ["echo-image", "queue", "create"],
      ["greeter", "queue", "create"],
    ]);
    try {
      const worker = await bothAnswer(first.endpoints, KEY);
      const echoId = named(first.endpoints, "echo-image").id;
      const [container] = await containersOf(echoId);
      expect(container!.Image).toBe(IMAGE);
      const inspected = await docker.getContainer(container!.Id).inspect();
      expect(inspected.HostConfig.ShmSize).toBe(128 * 1024 * 1024);
      expect(inspected.Config.Env).toContain("GREETING=hi");
      expect(inspected.Config.Env).toContain(`RUNPOD_POD_ID=${worker}`);

      // The same sources again: nothing changes, the image's worker keeps serving.
      expect(deploy().endpoints.map((e) => e.action)).toEqual(["unchanged", "unchanged"]);

      // A new tag of the image: a new release of the image endpoint; the TypeScript endpoint is left as it is.
      writeFileSync(source, readFileSync(source, "utf8").replace(IMAGE, IMAGE_2));
      const second = deploy();
      expect(second.endpoints.map((e) => [e.name, e.action])).toEqual([
        ["echo-image", "update"],
        ["greeter", "unchanged"],
      ]);
      const again = await post(`${named(second.endpoints, "echo-image").url}/runsync`, KEY, { input: { mode: "echo", value: 2 } });
      expect(again.body).toMatchObject({ status: "COMPLETED", output: { value: 2 } });
      expect(again.body.output.worker).not.toBe(worker);
      const images = (await containersOf(echoId)).map((c) => c.Image);
      expect(images).toContain(IMAGE_2);
      const env = (await get(`${url}/v1/apps/${app}/environments/${second.env}/releases`, KEY)).body;
      expect(env.releases.map((r: { state: string }) => r.state).slice(0, 3)).toEqual(["live", "replaced", "replaced"]);
      expect(env.releases[0].endpoints.map((e: { name: string }) => e.name)).toEqual(["echo-image"]);

      // An image the engine does not hold: Docker pulls it at the worker's start; one no registry has leaves the
      // endpoint's workers unstarted, the environment saying why, while the release goes on.
      writeFileSync(source, readFileSync(source, "utf8").replace(IMAGE_2, "svc-test-provider-worker:absent"));
      const detached = svc(["deploy", "--detach"], { SVC_API_URL: url, SVC_API_KEY: KEY });
      expect(detached.status, detached.stderr).toBe(0);
      const deadline = Date.now() + 120_000;
      let reason = "";
      while (!reason.includes('pulling "svc-test-provider-worker:absent" failed') && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        const env = (await get(`${url}/v1/apps/${app}/environments/${second.env}`, KEY)).body as {
          endpoints: Array<{ id: string; lastStartError?: { message: string } | null }>;
        };
        reason = env.endpoints.find((e) => e.id === echoId)?.lastStartError?.message ?? "";
      }
      expect(reason).toContain('pulling "svc-test-provider-worker:absent" failed');
    } finally {
      writeFileSync(source, original);
      await stop(server);
    }
    expect(await server.exit).toBe(0);
  }, 400_000);

  it("svc deploy --preview runs both, one container each, and leaves nothing behind", async () => {
    const preview = start(["deploy", "--preview", "--json", "--port", "0"]);
    const ready = await withCommand(preview, async () => {
      const ready = await firstJsonOnStdout<{ apiKey: string; session: string; endpoints: Listed[] }>(
        preview.child,
        "svc deploy --preview",
        240_000,
        preview.stderr,
      );
      await bothAnswer(ready.endpoints, ready.apiKey);
      const [container] = await containersOf(named(ready.endpoints, "echo-image").id);
      expect(container!.Image).toBe(IMAGE);
      expect(container!.Labels[LABELS.session]).toBe(ready.session);
      return ready;
    });
    expect(await preview.exit).toBe(0);
    expect(await docker.listContainers({ all: true, filters: { label: [`${LABELS.session}=${ready.session}`] } })).toEqual([]);
  }, 300_000);

  it("svc dev runs the TypeScript endpoint as a process and the image endpoint in Docker", async () => {
    const dev = start(["dev", "--port", "0", "--json", "--no-watch"]);
    const echoId = await withCommand(dev, async () => {
      const ready = await firstJsonOnStdout<{ apiKey: string; endpoints: Listed[] }>(dev.child, "svc dev", 120_000, dev.stderr);
      await bothAnswer(ready.endpoints, ready.apiKey);
      const echoId = named(ready.endpoints, "echo-image").id;
      expect((await containersOf(echoId)).map((c) => c.Image)).toEqual([IMAGE]);
      // The TypeScript endpoint has no container: it runs as a local process.
      expect(await containersOf(named(ready.endpoints, "greeter").id)).toEqual([]);
      return echoId;
    });
    expect(await dev.exit).toBe(0);
    expect(await docker.listContainers({ all: true, filters: { label: [`${LABELS.endpoint}=${echoId}`] } })).toEqual([]);
  }, 180_000);

  it("svc dev without a Docker engine serves the TypeScript endpoint and says what the image endpoint needs", async () => {
    const dev = start(["dev", "--port", "0", "--json", "--no-watch"], { DOCKER_HOST: `unix://${join(work, "no-docker.sock")}` });
    await withCommand(dev, async () => {
      const ready = await firstJsonOnStdout<{ apiKey: string; endpoints: Listed[] }>(dev.child, "svc dev", 120_000, dev.stderr);
      const greeted = await post(`${named(ready.endpoints, "greeter").url}/runsync`, ready.apiKey, { input: { name: "bo" } });
      expect(greeted.body).toMatchObject({ status: "COMPLETED", output: { hello: "bo" } });
      expect(dev.stderr()).toContain(`Endpoint "echo-image" runs the image "${IMAGE}" in Docker, and no Docker engine answers at`);
      expect(dev.stderr()).toContain("Start a Docker engine (or set DOCKER_HOST) and restart `svc dev`");
      // Its jobs are accepted and wait in the queue.
      const echoUrl = named(ready.endpoints, "echo-image").url;
      const queued = await post(`${echoUrl}/run`, ready.apiKey, { input: { mode: "echo", value: 1 } });
      expect(queued.status).toBe(200);
      await new Promise((r) => setTimeout(r, 1500));
      expect((await get(`${echoUrl}/status/${queued.body.id}`, ready.apiKey)).body.status).toBe("IN_QUEUE");
    });
    expect(await dev.exit).toBe(0);
  }, 180_000);
});
