// svc itself as a Swarm stack (deploy/swarm/svc-stack.yml) on a real single-node swarm: the server and worker
// images built by `svc images build --cpu --server`, `docker stack deploy` of two `svc server` replicas on a
// PostgreSQL database of the host, both healthy; an app deployed through the `svc` binary to an address in front
// of them (a proxy container on the stack's overlay network, published on 127.0.0.1); jobs run to COMPLETED by
// workers the swarm driver places on that network; the replica serving jobs killed (Swarm starts it again) while
// a job runs, and jobs still complete; then `docker stack rm`, and no service, container or network of svc is left.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { describeDocker, docker, engineUp } from "../docker/engine.js";
import { postgresUnavailable, startPostgres, type TestPostgres } from "../postgres.js";
import { joinSwarm, leaveSwarm } from "./swarm-mode.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const STACK_FILE = join(repo, "deploy", "swarm", "svc-stack.yml");
const KEY = "stack-admin-key";
const stack = `svcstack${Date.now().toString(36)}`;
const network = `${stack}-net`;
const front = `${stack}-front`;
const app = `stack-${Date.now().toString(36)}`;
const STACK_LABEL = "com.docker.stack.namespace";
const usable = engineUp && postgresUnavailable() === undefined;

let database: TestPostgres | undefined;
let forwarder: Server | undefined;
let work: string | undefined;
let joined = false;

const cli = (args: string[], env: NodeJS.ProcessEnv = process.env, timeout = 120_000) => spawnSync(args[0]!, args.slice(1), { env, encoding: "utf8", timeout });
const stackLogs = () => cli(["docker", "service", "logs", "--raw", "--tail", "80", `${stack}_svc`]).stdout;
const serverContainers = () => docker.listContainers({ filters: { label: [`${STACK_LABEL}=${stack}`], status: ["running"] } });
const appServices = async () =>
  (await docker.listServices({ filters: { label: [`${LABELS.app}=${app}`] } })) as Array<{
    ID: string;
    Spec?: { TaskTemplate?: { Networks?: Array<{ Target?: string }> } };
  }>;

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n--- svc server logs\n${stackLogs()}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

beforeAll(() => {
  if (!usable) return;
  joinSwarm();
  joined = true;
}, 180_000);

afterAll(async () => {
  if (engineUp && joined) {
    await docker
      .getContainer(front)
      .remove({ force: true })
      .catch(() => undefined);
    cli(["docker", "stack", "rm", stack]);
    for (const s of await appServices().catch(() => []))
      await docker
        .getService(s.ID)
        .remove()
        .catch(() => undefined);
    await until(
      "the stack's containers gone",
      async () => ((await docker.listContainers({ all: true, filters: { label: [`${STACK_LABEL}=${stack}`] } })).length === 0 ? true : undefined),
      60_000,
    ).catch(() => undefined);
    await docker
      .getNetwork(network)
      .remove()
      .catch(() => undefined);
    leaveSwarm();
  }
  forwarder?.close();
  await database?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 180_000);

describeDocker("svc itself as a Swarm stack", () => {
  it.skipIf(postgresUnavailable() !== undefined)(
    "runs two svc server replicas from the stack file: jobs complete, through a killed replica, and nothing is left after docker stack rm",
    async () => {
      work = mkdtempSync(join(tmpdir(), "svc-stack-"));
      const env: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
      for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];

      // The images, built here from this machine's Node (nothing pulled).
      const built = cli([process.execPath, join(repo, "bin", "svc.js"), "images", "build", "--cpu", "--server", "--json"], env, 300_000);
      expect(built.status, built.stderr).toBe(0);
      const images = JSON.parse(built.stdout) as Array<{ kind: string; name: string }>;
      const serverImage = images.find((i) => i.kind === "server")!.name;
      const workerImage = images.find((i) => i.kind === "cpu")!.name;
      expect(serverImage).toMatch(/^svc-server:/);

      // PostgreSQL on the host, reached from the tasks at the address of the host on their bridge to it
      // (docker_gwbridge's gateway), through a forwarder to its loopback port.
      database = await startPostgres();
      const storeUrl = new URL(await database.createDatabase());
      const gateway = (await docker.getNetwork("docker_gwbridge").inspect()).IPAM.Config[0].Gateway as string;
      const pgPort = Number(storeUrl.port);
      forwarder = createServer((client) => {
        const upstream = connect(pgPort, "127.0.0.1");
        client.pipe(upstream).pipe(client);
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
      });
      await new Promise<void>((resolve) => forwarder!.listen(0, gateway, resolve));
      const hostStoreUrl = storeUrl.toString();
      storeUrl.hostname = gateway;
      storeUrl.port = String((forwarder.address() as { port: number }).port);

      const deployed = cli(["docker", "stack", "deploy", "--resolve-image", "never", "-c", STACK_FILE, stack], {
        ...env,
        SVC_IMAGE: serverImage,
        SVC_WORKER_IMAGE: workerImage,
        SVC_STORE_URL: storeUrl.toString(),
        SVC_API_KEY: KEY,
        SVC_SECRETS_KEY: randomBytes(32).toString("base64"),
        SVC_NETWORK: network,
        SVC_REPLICAS: "2",
      });
      expect(deployed.status, deployed.stderr).toBe(0);
      const service = (await docker.getService(`${stack}_svc`).inspect()) as {
        Spec: {
          Labels: Record<string, string>;
          Mode: { Replicated: { Replicas: number } };
          EndpointSpec: { Mode: string };
          TaskTemplate: { RestartPolicy: { Condition: string } };
        };
      };
      expect(service.Spec.Labels).toMatchObject({ [LABELS.managed]: "true", [STACK_LABEL]: stack });
      expect(service.Spec.Mode.Replicated.Replicas).toBe(2);
      expect(service.Spec.TaskTemplate.RestartPolicy.Condition).toBe("on-failure");

      // Both replicas healthy (the stack's health check: /openapi.json answers).
      const healthy = async (n: number) => {
        const running = await serverContainers();
        if (running.length !== n || !running.every((c) => /\(healthy\)/.test(c.Status))) return undefined;
        return running;
      };
      const replicas = await until("two healthy replicas", () => healthy(2), 120_000);

      // Clients reach the replicas through a proxy on the stack's network (dnsrr: `svc` names every replica).
      const proxyScript = `const net=require("net");net.createServer(c=>{const u=net.connect(8600,"svc");c.pipe(u).pipe(c);u.on("error",()=>c.destroy());c.on("error",()=>u.destroy())}).listen(8700)`;
      const ran = cli([
        "docker",
        "run",
        "-d",
        "--name",
        front,
        "--label",
        `${LABELS.managed}=true`,
        "--network",
        network,
        "-p",
        "127.0.0.1::8700",
        "--entrypoint",
        "/usr/local/bin/node",
        serverImage,
        "-e",
        proxyScript,
      ]);
      expect(ran.status, ran.stderr).toBe(0);
      const published = (await docker.getContainer(front).inspect()).NetworkSettings.Ports["8700/tcp"]![0]!.HostPort;
      const url = `http://127.0.0.1:${published}`;
      const api = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
      };
      await until("the service through the proxy", async () => ((await api("GET", "/v1/apps")).status === 200 ? true : undefined), 60_000);

      const project = copyFixture("swarm-app", work);
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: app, private: true, type: "module" }));
      await deployFixture(project, url, KEY).catch((err: Error) => {
        throw new Error(`${err.message}\n--- svc server logs\n${stackLogs()}`);
      });
      // A read through the other replica may lag the deploy by its sync period (docs/scale-out.md).
      const endpoint = await until(
        "the deployed endpoint on every replica",
        async () => {
          const seen = await Promise.all(
            [1, 2, 3, 4].map(async () => (await api("GET", `/v1/apps/${app}/environments/prod`)).body?.endpoints?.[0]?.id as string | undefined),
          );
          return seen.every((id) => id && id === seen[0]) ? seen[0] : undefined;
        },
        30_000,
      );

      const submit = async (input: unknown): Promise<string> =>
        until(
          "a job accepted",
          async () => {
            const r = await api("POST", `/v2/${endpoint}/run`, { input });
            return r.status === 200 ? (r.body.id as string) : undefined;
          },
          60_000,
        );
      const completed = (id: string, ms: number) =>
        until(
          `job ${id} to end`,
          async () => {
            const r = await api("GET", `/v2/${endpoint}/status/${id}`);
            return r.body?.status === "COMPLETED" || r.body?.status === "FAILED" ? (r.body as { status: string; output: Array<{ i: number }> }) : undefined;
          },
          ms,
        );

      // Jobs through the stack, run by workers the swarm driver made: Swarm services on the stack's network.
      const ids = await Promise.all([1, 2, 3].map(() => submit({ n: 3, ms: 50 })));
      for (const id of ids) {
        const done = await completed(id, 120_000);
        expect(done.status).toBe("COMPLETED");
        expect(done.output.map((c) => c.i)).toEqual([1, 2, 3]);
      }

      // The replica serving jobs (the jobs lease's holder names its host: the container's short id) killed while a
      // job runs: Swarm starts another task in its place, the other replica takes over, jobs complete.
      const long = await submit({ n: 40, ms: 200 });
      await until(
        "the long job running",
        async () => ((await api("GET", `/v2/${endpoint}/status/${long}`)).body.status === "IN_PROGRESS" ? true : undefined),
        120_000,
      );
      // Its worker is a Swarm service on the stack's network, where `svc` (SVC_CLUSTER_URL) resolves.
      const networkId = (await docker.getNetwork(network).inspect()).Id as string;
      const [worker] = await appServices();
      expect(worker?.Spec?.TaskTemplate?.Networks?.map((n) => n.Target)).toEqual([networkId]);
      const client = new pg.Client({ connectionString: hostStoreUrl });
      await client.connect();
      const holder = (await client.query<{ holder: string }>("SELECT holder FROM svc_leases WHERE name = 'jobs'")).rows[0]!.holder;
      await client.end();
      const victim = replicas.find((c) => c.Id.startsWith(holder.split(":")[0]!));
      expect(victim, `the jobs lease's holder ${holder} among the replicas`).toBeDefined();
      await docker.getContainer(victim!.Id).kill();
      const after = await submit({ n: 3, ms: 50 });
      expect((await completed(long, 180_000)).status).toBe("COMPLETED");
      const afterDone = await completed(after, 120_000);
      expect(afterDone.status).toBe("COMPLETED");
      expect(afterDone.output.map((c) => c.i)).toEqual([1, 2, 3]);
      const restarted = await until("two healthy replicas again", () => healthy(2), 120_000);
      expect(restarted.map((c) => c.Id)).not.toContain(victim!.Id);
      const again = await submit({ n: 2, ms: 50 });
      expect((await completed(again, 120_000)).status).toBe("COMPLETED");

      // The app deleted (its workers stopped), the proxy removed, then the stack: nothing of svc is left.
      expect((await api("DELETE", `/v1/apps/${app}`)).status).toBe(200);
      await until("no worker service of the app", async () => ((await appServices()).length === 0 ? true : undefined), 60_000);
      // A removed service's tasks take a moment to stop, holding the stack's network while they do.
      await until(
        "no worker container of the app",
        async () => ((await docker.listContainers({ all: true, filters: { label: [`${LABELS.app}=${app}`] } })).length === 0 ? true : undefined),
        60_000,
      );
      await docker.getContainer(front).remove({ force: true });
      // `docker stack rm` does not wait for the stack's own tasks to stop: a network one of them still holds is
      // refused ("in use by task") and goes when it is run again, as docs/cluster.md tells users to.
      const removed = await until(
        "docker stack rm",
        async () => {
          const r = cli(["docker", "stack", "rm", stack]);
          return r.status !== 0 && /in use by task/.test(r.stderr) ? undefined : r;
        },
        60_000,
      );
      expect(removed.status, removed.stderr).toBe(0);
      await until(
        "nothing of the stack left",
        async () => {
          const [services, containers, networks, workerServices] = await Promise.all([
            docker.listServices({ filters: { label: [`${STACK_LABEL}=${stack}`] } }),
            docker.listContainers({ all: true, filters: { label: [`${STACK_LABEL}=${stack}`] } }),
            docker.listNetworks({ filters: { name: [network] } }),
            appServices(),
          ]);
          return services.length + containers.length + networks.filter((n) => n.Name === network).length + workerServices.length === 0 ? true : undefined;
        },
        90_000,
      );
    },
    420_000,
  );
});
