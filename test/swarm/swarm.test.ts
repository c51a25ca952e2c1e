// `svc server --workers swarm` on a real single-node swarm (`docker swarm init --advertise-addr 127.0.0.1`, left
// after when the tests made it: test/swarm/swarm-mode.ts): an app deployed through the `svc` binary, its jobs run by workers that are Swarm
// services (labelled, one task each, no restart policy), scaled from zero and back; a task killed mid-job and the
// job finished by another worker; the app deleted and nothing of it left in the swarm. Then the registry path:
// worker images pushed to a real registry (Debian's docker-registry on 127.0.0.1) by `svc images build --registry`,
// and a server given that registry runs its workers from it, referenced by digest and pulled from the registry.
// Last, two replicas on PostgreSQL: the one serving jobs is killed while its Swarm worker runs a job; the other
// takes over and adopts that worker's service (shared labels) instead of starting another, the job completes,
// and the service is removed once the endpoint idles back to zero.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";
import { joinSwarm, leaveSwarm } from "./swarm-mode.js";
import { roundRobin as roundRobinProxy } from "../../bench/tcp-proxy.mjs";
import type { Server } from "node:net";

const roundRobin = roundRobinProxy as (ports: () => number[]) => Promise<{ server: Server; url: string }>;
let database: TestPostgres | undefined;
let proxy: { server: Server; url: string } | undefined;
const replicas: ServerProcess[] = [];

const KEY = "swarm-admin-key";
const REGISTRY_BIN = "/usr/bin/docker-registry";
const repo = fileURLToPath(new URL("../..", import.meta.url));
let registryProcess: ChildProcess | undefined;
let registry: string | undefined;
const app = `swarm-${Date.now().toString(36)}`;
let work: string | undefined;
let server: ServerProcess | undefined;
const appServices = async () =>
  (await docker.listServices({ filters: { label: [`${LABELS.app}=${app}`] } })) as Array<{
    ID: string;
    Spec?: { Labels?: Record<string, string>; TaskTemplate?: { RestartPolicy?: { Condition?: string } } };
  }>;
const appContainers = async (all = false) => docker.listContainers({ all, filters: { label: [`${LABELS.app}=${app}`] } });

beforeAll(() => {
  if (engineUp) joinSwarm();
}, 180_000);

afterAll(async () => {
  if (server) {
    server.child.kill("SIGKILL");
  }
  registryProcess?.kill();
  for (const r of replicas) r.child.kill("SIGKILL");
  proxy?.server.close();
  await database?.stop();
  if (engineUp) {
    // The names this test gave images in the registry's name (the images themselves stay).
    if (registry) {
      for (const image of await docker.listImages()) {
        for (const ref of [...(image.RepoTags ?? []), ...(image.RepoDigests ?? [])])
          if (ref.startsWith(`${registry}/`))
            await docker
              .getImage(ref)
              .remove()
              .catch(() => undefined);
      }
    }
    for (const s of await appServices().catch(() => []))
      await docker
        .getService(s.ID)
        .remove()
        .catch(() => undefined);
    for (const c of await appContainers(true).catch(() => []))
      await docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined);
    leaveSwarm();
  }
  if (work) rmSync(work, { recursive: true, force: true });
}, 120_000);

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server!.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n--- server log\n${server?.log() ?? ""}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describeDocker("svc server --workers swarm", () => {
  it("runs an app's jobs on Swarm services: from zero and back, through a killed task, and leaves nothing when the app is deleted", async () => {
    work = mkdtempSync(join(tmpdir(), "svc-swarm-"));
    server = await startServerProcess({ dataDir: join(work, "data"), env: { SVC_API_KEY: KEY }, workers: "swarm" });
    const project = copyFixture("swarm-app", work);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
    await deployFixture(project, server.url, KEY).catch((err: Error) => {
      throw new Error(`${err.message}\n--- server log\n${server!.log()}`);
    });
    const endpoint: string = (await api("GET", `/v1/apps/${app}/environments/prod`)).body.endpoints[0].id;

    // The release's worker ran as a Swarm service with svc's labels and no restart policy of its own.
    // Idle for its 1 s timeout, it is gone again: the endpoint is at zero.
    await until("the endpoint back at zero workers", async () => ((await appServices()).length === 0 ? true : undefined), 60_000);

    // From zero: the job makes a Swarm service, which runs it.
    const first = await api("POST", `/v2/${endpoint}/run`, { input: { n: 3, ms: 50 } });
    expect(first.status).toBe(200);
    const services = await until("a worker service", async () => ((await appServices()).length > 0 ? appServices() : undefined), 60_000);
    expect(services[0]!.Spec?.Labels).toMatchObject({ [LABELS.managed]: "true", [LABELS.app]: app, [LABELS.endpoint]: endpoint });
    expect(services[0]!.Spec?.TaskTemplate?.RestartPolicy?.Condition).toBe("none");
    // Swarm reserves what the endpoint's CPU instance names (the default cpu3c-1-2: 1 vCPU, 2 GB) on the node, and
    // holds the worker to it, with a process limit (docs/security.md).
    expect((services[0]!.Spec?.TaskTemplate as { Resources?: unknown } | undefined)?.Resources).toEqual({
      Reservations: { NanoCPUs: 1e9, MemoryBytes: 2 * 1024 ** 3 },
      Limits: { NanoCPUs: 1e9, MemoryBytes: 2 * 1024 ** 3, Pids: 1024 },
    });
    const done = await until(
      "the first job",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/status/${first.body.id}`);
        return r.body.status === "COMPLETED" ? r.body : undefined;
      },
      120_000,
    );
    expect(done.output.map((c: { i: number }) => c.i)).toEqual([1, 2, 3]);
    // What the job's code wrote, read from the worker service's log, is the job's log, in order, once each.
    type Line = { jobId?: string; stream: string; text: string; workerId?: string };
    const jobLines = await until(
      "the first job's log lines",
      async () => {
        const r = await api("GET", `/v1/endpoints/${endpoint}/logs?job=${first.body.id}`);
        const lines = (r.body.lines as Line[]).filter((l) => l.text.startsWith("tick "));
        return lines.length >= 3 ? lines : undefined;
      },
      30_000,
    );
    expect(jobLines.map((l) => [l.text, l.stream, l.jobId])).toEqual([1, 2, 3].map((i) => [`tick ${i} of 3`, "stdout", first.body.id]));

    // A task killed mid-job: the job runs again on another worker and completes.
    const long = await api("POST", `/v2/${endpoint}/run`, { input: { n: 30, ms: 200 } });
    const workerBefore = await until(
      "the long job's first chunk",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/stream/${long.body.id}`);
        return r.body.stream?.[0]?.output?.worker as string | undefined;
      },
      120_000,
    );
    const running = await appContainers();
    expect(running.length).toBe(1);
    await docker.getContainer(running[0]!.Id).kill();
    const finished = await until(
      "the long job after the kill",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/status/${long.body.id}`);
        return r.body.status === "COMPLETED" || r.body.status === "FAILED" ? r.body : undefined;
      },
      180_000,
    );
    expect(finished.status).toBe("COMPLETED");
    // Its last chunks come from the worker that replaced the killed one.
    const chunks = finished.output as Array<{ i: number; worker: string }>;
    expect(chunks.at(-1)).toMatchObject({ i: 30 });
    expect(workerBefore).toMatch(/^w/);
    expect(chunks.at(-1)!.worker).not.toBe(workerBefore);

    // A release while a worker is mid-job: the old revision's worker finishes that job (drained, not killed),
    // then its service goes; new jobs run the new code, and only the new revision's services are left.
    const draining = await api("POST", `/v2/${endpoint}/run`, { input: { n: 20, ms: 200 } });
    const oldWorker = await until(
      "the draining job's first chunk",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/stream/${draining.body.id}`);
        return r.body.stream?.[0]?.output?.worker as string | undefined;
      },
      120_000,
    );
    const oldRevision = (await appServices())[0]!.Spec?.Labels?.["svc.revision"];
    expect(oldRevision).toBeTruthy();
    const source = join(project, "src", readdirSync(join(project, "src"))[0]!);
    writeFileSync(
      source,
      readFileSync(source, "utf8").replace("yield { i, worker: process.env.SVC_WORKER_ID }", "yield { i, worker: process.env.SVC_WORKER_ID, release: 2 }"),
    );
    await deployFixture(project, server.url, KEY).catch((err: Error) => {
      throw new Error(`${err.message}\n--- server log\n${server!.log()}`);
    });
    const drained = await until(
      "the job that was running during the release",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/status/${draining.body.id}`);
        return r.body.status === "COMPLETED" || r.body.status === "FAILED" ? r.body : undefined;
      },
      180_000,
    );
    expect(drained.status).toBe("COMPLETED");
    const drainedChunks = drained.output as Array<{ i: number; worker: string; release?: number }>;
    expect(drainedChunks.map((c) => c.i)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(new Set(drainedChunks.map((c) => c.worker))).toEqual(new Set([oldWorker]));
    expect(drainedChunks.some((c) => c.release !== undefined)).toBe(false);
    const after = await api("POST", `/v2/${endpoint}/run`, { input: { n: 1, ms: 10 } });
    const afterDone = await until(
      "a job after the release",
      async () => {
        const r = await api("GET", `/v2/${endpoint}/status/${after.body.id}`);
        return r.body.status === "COMPLETED" ? r.body : undefined;
      },
      120_000,
    );
    expect(afterDone.output[0].release).toBe(2);
    await until(
      "only the new revision's services",
      async () => {
        const left = await appServices();
        return left.every((s) => s.Spec?.Labels?.["svc.revision"] !== oldRevision) ? true : undefined;
      },
      60_000,
    );

    // A worker that crashes (writes its last words to stderr and exits): they reach the endpoint's log, read
    // before its service is removed.
    const lastWords = `ticker crashed on purpose ${Date.now()}`;
    const crashing = await api("POST", `/v2/${endpoint}/run`, { input: { n: 1, ms: 10, crash: lastWords } });
    await until(
      "the crashed worker's last line in the endpoint's log",
      async () => {
        const r = await api("GET", `/v1/endpoints/${endpoint}/logs`);
        return (r.body.lines as Line[]).some((l) => l.text === lastWords) ? true : undefined;
      },
      120_000,
    );
    // The job goes back to the queue each time its worker dies: cancelled, it crashes no more workers. The crashed
    // workers' services are removed once their last lines are read.
    expect((await api("POST", `/v2/${endpoint}/cancel/${crashing.body.id}`)).status).toBe(200);
    await until("no service of the app left", async () => ((await appServices()).length === 0 ? true : undefined), 60_000);
    const crashLines = ((await api("GET", `/v1/endpoints/${endpoint}/logs`)).body.lines as Line[]).filter((l) => l.text === lastWords);
    // Each worker's last words once (the follow and the last read do not both deliver them), on stderr.
    expect(crashLines.map((l) => l.stream)).toEqual(crashLines.map(() => "stderr"));
    expect(new Set(crashLines.map((l) => l.workerId)).size).toBe(crashLines.length);

    // Deleting the app stops its workers and removes their services: nothing of it is left in the swarm.
    const deleted = await api("DELETE", `/v1/apps/${app}`);
    expect(deleted.status).toBe(200);
    await until(
      "no service or container of the app",
      async () => ((await appServices()).length === 0 && (await appContainers(true)).length === 0 ? true : undefined),
      60_000,
    );
  }, 600_000);

  it.skipIf(!existsSync(REGISTRY_BIN))(
    "runs workers from the registry's image, referenced by digest and pulled from the registry",
    async () => {
      work ??= mkdtempSync(join(tmpdir(), "svc-swarm-"));
      const port = await new Promise<number>((resolve) => {
        const probe = createServer().listen(0, "127.0.0.1", () => {
          const { port: p } = probe.address() as { port: number };
          probe.close(() => resolve(p));
        });
      });
      registry = `127.0.0.1:${port}`;
      const config = join(work, "registry.yml");
      writeFileSync(config, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${join(work, "registry")}\nhttp:\n  addr: ${registry}\n`);
      registryProcess = spawn(REGISTRY_BIN, ["serve", config], { stdio: "ignore" });
      await until(
        "the registry",
        async () =>
          (await fetch(`http://${registry}/v2/`).then(
            (r) => r.ok,
            () => false,
          ))
            ? true
            : undefined,
        20_000,
      );
      const env: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
      for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
      const built = spawnSync(process.execPath, [join(repo, "bin", "svc.js"), "images", "build", "--cpu", "--registry", registry, "--json"], {
        env,
        encoding: "utf8",
        timeout: 300_000,
      });
      expect(built.status, built.stderr).toBe(0);
      const pushed = (JSON.parse(built.stdout) as Array<{ pushed: { reference: string } }>)[0]!.pushed.reference;
      // The engine keeps no name of the registry's: the swarm resolves the digest there.
      for (const image of await docker.listImages()) {
        for (const ref of [...(image.RepoTags ?? []), ...(image.RepoDigests ?? [])])
          if (ref.startsWith(`${registry}/`))
            await docker
              .getImage(ref)
              .remove()
              .catch(() => undefined);
      }
      expect((await docker.listImages()).flatMap((i) => [...(i.RepoTags ?? []), ...(i.RepoDigests ?? [])]).filter((r) => r.startsWith(`${registry}/`))).toEqual(
        [],
      );

      server?.child.kill("SIGKILL");
      server = await startServerProcess({ dataDir: join(work, "data-registry"), env: { SVC_API_KEY: KEY, SVC_WORKER_REGISTRY: registry }, workers: "swarm" });
      const project = copyFixture("swarm-app", join(work, "registry-app"));
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
      await deployFixture(project, server.url, KEY).catch((err: Error) => {
        throw new Error(`${err.message}\n--- server log\n${server!.log()}`);
      });
      const endpoint: string = (await api("GET", `/v1/apps/${app}/environments/prod`)).body.endpoints[0].id;
      const job = await api("POST", `/v2/${endpoint}/run`, { input: { n: 2, ms: 50 } });
      const service = await until(
        "a worker service",
        async () => (await appServices())[0] as { Spec?: { TaskTemplate?: { ContainerSpec?: { Image?: string } } } } | undefined,
        60_000,
      );
      expect(service.Spec?.TaskTemplate?.ContainerSpec?.Image).toBe(pushed);
      await until("the job", async () => ((await api("GET", `/v2/${endpoint}/status/${job.body.id}`)).body.status === "COMPLETED" ? true : undefined), 120_000);
      expect((await api("DELETE", `/v1/apps/${app}`)).status).toBe(200);
      await until("no service of the app", async () => ((await appServices()).length === 0 ? true : undefined), 60_000);
    },
    600_000,
  );

  it.skipIf(postgresUnavailable() !== undefined)(
    "a replica that takes over adopts the Swarm workers of the one that died, without starting more",
    async () => {
      work ??= mkdtempSync(join(tmpdir(), "svc-swarm-"));
      server?.child.kill("SIGKILL");
      database = await startPostgres();
      const storeUrl = await database.createDatabase();
      const alive = new Set<number>();
      proxy = await roundRobin(() => replicas.filter((_, i) => alive.has(i)).map((r) => Number(new URL(r.url).port)));
      for (let i = 0; i < 2; i++) {
        replicas.push(
          await startServerProcess({
            dataDir: join(work, `replica${i}`),
            env: { SVC_API_KEY: KEY, SVC_STORE_URL: storeUrl, SVC_CLUSTER_URL: proxy.url },
            workers: "swarm",
          }),
        );
        alive.add(i);
      }
      const via = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${proxy!.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
      };
      const project = copyFixture("swarm-app", join(work, "replicas-app"));
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
      await deployFixture(project, proxy.url, KEY).catch((err: Error) => {
        throw new Error(`${err.message}\n${replicas.map((r, i) => `--- replica ${i}\n${r.log()}`).join("\n")}`);
      });
      const endpoint: string = (await via("GET", `/v1/apps/${app}/environments/prod`)).body.endpoints[0].id;
      // Long enough to outlast the takeover: its last lines are written after the adoption.
      const job = await via("POST", `/v2/${endpoint}/run`, { input: { n: 150, ms: 200 } });
      expect(job.status).toBe(200);
      await until(
        "the job running",
        async () => ((await via("GET", `/v2/${endpoint}/status/${job.body.id}`)).body.status === "IN_PROGRESS" ? true : undefined),
        120_000,
      );
      const [before] = await appServices();
      expect(before).toBeDefined();

      // The replica serving jobs (the first one started) dies; its worker goes on through the proxy.
      alive.delete(0);
      replicas[0]!.child.kill("SIGKILL");
      let most = 0;
      const done = await until(
        "the job after the takeover",
        async () => {
          most = Math.max(most, (await appServices()).length);
          const r = await via("GET", `/v2/${endpoint}/status/${job.body.id}`).catch(() => undefined);
          return r?.body?.status === "COMPLETED" || r?.body?.status === "FAILED" ? r.body : undefined;
        },
        180_000,
      );
      expect(done.status).toBe("COMPLETED");
      expect(most).toBe(1);
      expect((await appServices()).map((x) => x.ID)).toEqual([before!.ID]);
      expect(replicas[1]!.log()).toMatch(/now serves the jobs of this database/);
      // The adopted worker's output is followed from its adoption: the job's last line, written after the takeover,
      // is in the job's log, once.
      const lastLines = await until(
        "the job's last line after the takeover",
        async () => {
          const r = await via("GET", `/v1/endpoints/${endpoint}/logs?job=${job.body.id}`);
          const found = (r.body.lines as Array<{ text: string }>).filter((l) => l.text === "tick 150 of 150");
          return found.length > 0 ? found : undefined;
        },
        30_000,
      );
      expect(lastLines).toHaveLength(1);
      // Idle, the adopted worker is drained and its service removed by the replica that took over.
      await until("no service of the app", async () => ((await appServices()).length === 0 ? true : undefined), 60_000);
    },
    600_000,
  );
});
