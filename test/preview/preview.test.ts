// End to end: the `svc` binary runs `deploy --preview` on a copy of fixtures/preview-app with a real Docker engine:
// one container per endpoint on a network of the session; the printed local URLs answer (queue function,
// streaming function, class endpoint, load-balanced GET and POST routes, a function calling another endpoint);
// worker output streams on stderr prefixed with the endpoint name; SIGINT exits 0 and leaves no container,
// network or volume of the session; a SIGKILLed preview is cleaned up by the next start's stale-session sweep.
// The error cases need no engine (wrong flags, no engine) or a taken port.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupStale, detectGpuSupport, stagedArtifactsDir } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { removeStalePreviews } from "../../src/preview/session.js";
import { PREVIEW_LABELS } from "../../src/preview/render.js";
import { describeDocker, docker, engineUp, leftovers } from "../docker/engine.js";
import { firstJsonOnStdout } from "../cli-output.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");

interface Ready {
  url: string;
  app: string;
  env: string;
  session: string;
  apiKey: string;
  endpoints: Array<{ name: string; id: string; type: "queue" | "lb"; url: string; curl: string; functions: string[]; routes: string[] }>;
}

interface Preview {
  child: ChildProcessWithoutNullStreams;
  ready: Ready;
  stderr(): string;
  exit: Promise<number | null>;
}

let work: string;
let project: string;
const sessions = new Set<string>();
const children: ChildProcessWithoutNullStreams[] = [];

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true", ...extra };
  delete env.SVC_API_KEY;
  delete env.SVC_API_URL;
  return env;
}

async function startPreview(args: string[] = []): Promise<Preview> {
  const child = spawn(process.execPath, [bin, "deploy", "--preview", "--json", "--port", "0", "-C", project, ...args], { env: cliEnv() });
  children.push(child);
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const ready = await firstJsonOnStdout<Ready>(child, "svc deploy --preview", 120_000, () => stderr);
  sessions.add(ready.session);
  return { child, ready, stderr: () => stderr, exit };
}

/** Every Docker object of any preview (by the label all of them carry). */
async function previewObjects() {
  const filters = { label: [PREVIEW_LABELS.preview] };
  const [containers, networks, volumes] = await Promise.all([
    docker.listContainers({ all: true, filters }),
    docker.listNetworks({ filters }),
    docker.listVolumes({ filters }),
  ]);
  return {
    containers: containers.map((c) => c.Id).sort(),
    networks: networks.map((n) => n.Id).sort(),
    volumes: (volumes.Volumes ?? []).map((v) => v.Name).sort(),
  };
}

async function until<T>(probe: () => T | false | undefined | Promise<T | false | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-preview-e2e-"));
  project = join(work, "preview-app");
  cpSync(join(repo, "fixtures", "preview-app"), project, { recursive: true });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (engineUp) for (const session of sessions) await cleanupStale({ [LABELS.session]: session }, { docker }).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
});

describe("svc deploy --preview: errors before anything starts", () => {
  it("--preview with --env is a usage error (exit 2)", () => {
    const result = spawnSync(process.execPath, [bin, "deploy", "--preview", "--env", "prod", "-C", project], { env: cliEnv(), encoding: "utf8" });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("--preview runs its own environment");
    expect(result.stdout).toBe("");
  });

  it("no Docker engine: exit 1, naming where it looked and how to start one", () => {
    const result = spawnSync(process.execPath, [bin, "deploy", "--preview", "-C", project], {
      env: cliEnv({ DOCKER_HOST: `unix://${join(work, "no-engine.sock")}` }),
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`No Docker engine answers at unix://${join(work, "no-engine.sock")}`);
    expect(result.stderr).toContain("DOCKER_HOST");
    expect(result.stderr).toContain("scripts/ensure-docker.sh");
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });
});

describeDocker("svc deploy --preview with a real Docker engine", () => {
  let preview: Preview;
  const endpoint = (name: string) => {
    const e = preview.ready.endpoints.find((x) => x.name === name);
    if (!e) throw new Error(`no endpoint ${name} in ${JSON.stringify(preview.ready.endpoints)}`);
    return e;
  };
  const call = async (url: string, init: { method?: string; body?: unknown } = {}) => {
    const res = await fetch(url, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${preview.ready.apiKey}`, "content-type": "application/json" },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };

  beforeAll(async () => {
    preview = await startPreview();
  }, 150_000);

  it("prints every endpoint with its local URL and a curl, with one container per endpoint already running", async () => {
    const { ready } = preview;
    expect(ready.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.env).toBe("preview");
    expect(ready.endpoints.map((e) => [e.name, e.type]).sort()).toEqual([
      ["api", "lb"],
      ["counter", "queue"],
      ["echo", "queue"],
      ["relay", "queue"],
      ["tally", "queue"],
    ]);
    for (const e of ready.endpoints) {
      expect(e.url).toBe(e.type === "lb" ? `${ready.url}/lb/${e.id}` : `${ready.url}/v2/${e.id}`);
      expect(e.curl).toContain(e.url);
    }
    expect(endpoint("api").routes).toEqual(["GET /items/:id", "POST /echo"]);

    const mine = await leftovers(ready.session);
    expect(mine.containers).toHaveLength(5);
    expect(mine.networks).toEqual([`svc-session-${ready.session}`]);
    // echo's network volume is a directory of the preview's data dir, bind-mounted (docs/volumes.md): no Docker volume.
    expect(mine.volumes).toHaveLength(0);
    const [echo] = await docker.listContainers({ filters: { label: [`${LABELS.session}=${ready.session}`, `${LABELS.endpoint}=${endpoint("echo").id}`] } });
    expect(echo!.Mounts.some((m) => m.Type === "bind" && m.Destination === "/svc-volume")).toBe(true);
    const containers = await docker.listContainers({ filters: { label: [`${LABELS.session}=${ready.session}`] } });
    for (const c of containers) {
      expect(c.Labels).toMatchObject({ "svc.preview": "true", "svc.preview.pid": String(preview.child.pid), [LABELS.env]: "preview" });
      expect(Object.keys(c.NetworkSettings.Networks)).toEqual([`svc-session-${ready.session}`]);
      // Only ever published on loopback.
      for (const p of c.Ports) if (p.PublicPort) expect(p.IP).toBe("127.0.0.1");
    }
  });

  it("a queue-based function answers /runsync from its container, and its output streams on stderr with the endpoint's prefix", async () => {
    const r = await call(`${endpoint("echo").url}/runsync`, { body: { input: { text: "preview-1" } } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "COMPLETED", output: { echo: "preview-1", said: 1 } });
    const containers = await docker.listContainers({
      filters: { label: [`${LABELS.session}=${preview.ready.session}`, `${LABELS.endpoint}=${endpoint("echo").id}`] },
    });
    expect(r.body.output.host).toBe(containers[0]!.Id.slice(0, 12));
    // One prefix width for all endpoints: the longest name is "counter".
    await until(() => /^echo {4}\| echo says preview-1$/m.test(preview.stderr()));
  });

  it("a streaming function streams its chunks through /run and /stream", async () => {
    const submitted = await call(`${endpoint("counter").url}/run`, { body: { input: { to: 4 } } });
    expect(submitted.status).toBe(200);
    const chunks: unknown[] = [];
    await until(async () => {
      const s = await call(`${endpoint("counter").url}/stream/${submitted.body.id}`);
      chunks.push(...(s.body.stream ?? []).map((c: { output: unknown }) => c.output));
      return s.body.status === "COMPLETED";
    });
    expect(chunks).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
  });

  it("a class endpoint keeps one instance in its container", async () => {
    const first = await call(`${endpoint("tally").url}/runsync`, { body: { input: { n: 2 } } });
    const second = await call(`${endpoint("tally").url}/runsync`, { body: { input: { n: 3 } } });
    expect(first.body.output).toEqual({ total: 2 });
    expect(second.body.output).toEqual({ total: 5 });
  });

  it("the load-balanced API answers its GET and POST routes at its local address, served by its container", async () => {
    const get = await call(`${endpoint("api").url}/items/42?q=x`);
    expect(get.status).toBe(200);
    expect(get.body).toMatchObject({ id: "42", q: "x" });
    const [container] = await docker.listContainers({
      filters: { label: [`${LABELS.session}=${preview.ready.session}`, `${LABELS.endpoint}=${endpoint("api").id}`] },
    });
    expect(get.body.host).toBe(container!.Id.slice(0, 12));
    expect(get.headers.get("x-svc-worker")).toBe(container!.Labels[LABELS.worker]);

    const post = await call(`${endpoint("api").url}/echo`, { body: { a: [1, 2] } });
    expect(post.status).toBe(200);
    expect(post.body).toEqual({ got: { a: [1, 2] } });
    // Its log names where it listens as seen from outside: inside its container, not a loopback address.
    expect(preview.stderr()).toMatch(/^api\s+\| \[svc-runtime\] serving 2 route\(s\) and \/ping on port 8080 of this container$/m);

    // Without the key: the service's auth, not the container, answers.
    expect((await fetch(`${endpoint("api").url}/items/1`)).status).toBe(401);
  });

  it("the printed curl of the load-balanced API works as pasted", () => {
    const result = spawnSync("sh", ["-c", endpoint("api").curl], { encoding: "utf8", timeout: 15_000 });
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ id: "1" });
  });

  it("a function calling another endpoint goes container to container through the service", async () => {
    const r = await call(`${endpoint("relay").url}/runsync`, { body: { input: { text: "hop" } } });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("COMPLETED");
    expect(r.body.output.answer).toMatchObject({ echo: "hop via relay", said: 2 });
    expect(r.body.output.relayHost).not.toBe(r.body.output.answer.host);
    await until(() => /^echo {4}\| echo says hop via relay$/m.test(preview.stderr()));
  });

  it("SIGINT stops it with exit code 0 and leaves no container, network or volume of the session", async () => {
    preview.child.kill("SIGINT");
    const tail = () => preview.stderr().split("\n").slice(-30).join("\n");
    expect(await preview.exit, tail()).toBe(0);
    expect(preview.stderr()).toContain("preview stopped");
    expect(await leftovers(preview.ready.session), tail()).toEqual({ containers: [], networks: [], volumes: [] });
  }, 60_000);

  it("a preview killed with SIGKILL is cleaned up by the next start's sweep of stale sessions", async () => {
    const crashed = await startPreview();
    crashed.child.kill("SIGKILL");
    await crashed.exit;
    const left = await leftovers(crashed.ready.session);
    expect(left.containers).toHaveLength(5);
    expect(left.networks).toHaveLength(1);
    expect(left.volumes).toHaveLength(0);
    // The copies of the build its containers bind-mount, left in the temporary directory.
    const staged = stagedArtifactsDir(crashed.ready.session);
    expect(existsSync(staged)).toBe(true);

    // What the next `svc deploy --preview` runs first.
    const swept = await removeStalePreviews(docker);
    expect(swept.sessions).toContain(crashed.ready.session);
    expect(swept.removed.containers).toBeGreaterThanOrEqual(5);
    expect(await leftovers(crashed.ready.session)).toEqual({ containers: [], networks: [], volumes: [] });
    expect(existsSync(staged)).toBe(false);
  }, 150_000);

  it("an explicit --port in use is an error naming it (exit 1)", async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", () => r()));
    const port = (taken.address() as AddressInfo).port;
    try {
      const child = spawn(process.execPath, [bin, "deploy", "--preview", "--port", String(port), "-C", project], { env: cliEnv() });
      children.push(child);
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      expect(code).toBe(1);
      expect(stderr).toContain(`Port ${port} is already in use`);
      expect(stderr).toContain("--port");
    } finally {
      taken.close();
    }
  }, 60_000);
  it("a second SIGINT while stopping exits 130 at once; what it left is swept by the next start", async () => {
    const hurried = await startPreview();
    hurried.child.kill("SIGINT");
    await until(() => hurried.stderr().includes("SIGINT: stopping the preview"));
    hurried.child.kill("SIGINT");
    expect(await hurried.exit).toBe(130);
    expect(hurried.stderr()).toContain("SIGINT again: exiting without cleaning up (the next preview removes what is left)");
    await removeStalePreviews(docker);
    expect(await leftovers(hurried.ready.session)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 150_000);

  it("a worker image that cannot be built: exit 1 with the reason and what to do, nothing left behind", async () => {
    // No `ldd` on the PATH: the image's shared libraries cannot be listed.
    const bare = join(work, "bare-bin");
    mkdirSync(bare, { recursive: true });
    symlinkSync(process.execPath, join(bare, "node"));
    const before = await previewObjects();
    const result = spawnSync(join(bare, "node"), [bin, "deploy", "--preview", "--port", "0", "-C", project], {
      env: cliEnv({ PATH: bare }),
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("Could not build the worker image: `ldd` is not installed");
    expect(result.stderr).toContain("apt-get install libc-bin");
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(await previewObjects()).toEqual(before);
  }, 90_000);

  it("a GPU endpoint on a host without a GPU is refused before anything starts, pointing at --allow-cpu-fallback", async (ctx) => {
    if ((await detectGpuSupport(docker)).available) ctx.skip();
    const gpuProject = join(work, "gpu-app");
    mkdirSync(join(gpuProject, "src"), { recursive: true });
    writeFileSync(join(gpuProject, "package.json"), '{ "name": "gpu-app", "private": true, "type": "module" }\n');
    writeFileSync(
      join(gpuProject, "src", "upscale.ts"),
      'import { Endpoint } from "svc";\nconst gpu = Endpoint({ name: "upscaler", gpu: ["ADA_24"] });\nexport const upscale = gpu(async function upscale(input: { n: number }) { return input.n * 2; });\n',
    );
    const result = spawnSync(process.execPath, [bin, "deploy", "--preview", "--port", "0", "-C", gpuProject], {
      env: cliEnv(),
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("Endpoint(s) upscaler need a GPU, but");
    expect(result.stderr).toContain("--allow-cpu-fallback");
    expect(result.stdout).toBe("");
  }, 90_000);
});
