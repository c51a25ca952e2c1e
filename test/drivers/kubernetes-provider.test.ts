// A queue endpoint from a worker image built for the provider, on the Kubernetes driver, against the fake
// Kubernetes API server written for the tests (no real API server runs here). The scaler starts a Pod of the
// image; this test plays that Pod's container with the standard-library provider worker
// (fixtures/provider-worker) run as a process with exactly the Pod's variables (its token read from the worker's
// Secret, as the kubelet does), its output written to the Pod's log. The job completes through the provider's
// protocol, and what the worker printed reaches the endpoint's logs through the driver.

import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import type { V1Pod } from "@kubernetes/client-node";
import { createKubernetesDriver } from "../../src/drivers/kubernetes.js";
import { call, startTestService, until, type TestService } from "../service/helpers.js";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/fake-kube-api-server.js";

const FIXTURE = join(import.meta.dirname, "../../fixtures/provider-worker/provider-worker.py");
let fake: FakeKubeApiServer | undefined;
let t: TestService | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await t?.close();
  await fake?.close();
});

/** The fake API server, and the test service with a Kubernetes driver of session `session` on it. */
async function serviceOnFakeCluster(session: string): Promise<TestService> {
  fake = await startFakeKubeApiServer();
  const driver = createKubernetesDriver({
    kubeConfig: fake.kubeConfig(),
    namespace: "default",
    session,
    image: "svc-worker-cpu:test",
    rewatchMs: 100,
    logRetryMs: 100,
    stopGraceMs: 1000,
  });
  return startTestService({ driver, leaseMs: 3000, heartbeatMs: 1000 });
}

/** Plays every Pod's container: the provider worker, with the Pod's variables, its lines in the Pod's log. */
function playPods(f: FakeKubeApiServer) {
  const played = new Set<string>();
  const pods: V1Pod[] = [];
  const envs: Array<Record<string, string>> = [];
  const timer = setInterval(() => {
    for (const pod of f.pods()) {
      const name = pod.metadata!.name!;
      if (played.has(name)) continue;
      played.add(name);
      const secretValue = (ref: { name: string; key: string }) => {
        const data = f.secrets().find((x) => x.metadata!.name === ref.name)?.data?.[ref.key];
        return data === undefined ? "" : Buffer.from(data, "base64").toString("utf8");
      };
      const env = Object.fromEntries(
        pod.spec!.containers[0]!.env!.map((e) => [
          e.name,
          e.valueFrom?.secretKeyRef ? secretValue(e.valueFrom.secretKeyRef as { name: string; key: string }) : e.value!,
        ]),
      );
      pods.push(pod);
      envs.push(env);
      f.setPhase(name, "Running");
      const child = spawn("python3", [FIXTURE], { env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] });
      children.push(child);
      for (const stream of [child.stdout!, child.stderr!]) createInterface({ input: stream }).on("line", (line) => f.writeLog(name, line));
    }
  }, 50);
  return { pods, envs, stop: () => clearInterval(timer) };
}

it("a REST endpoint of a provider image runs as a Pod of the image: its job completes, its token only in the Secret, its lines in the logs", async () => {
  t = await serviceOnFakeCluster("svc-provider");
  const containers = playPods(fake!);
  try {
    const template = await call(`${t.service.url}/v1/templates`, {
      key: t.key,
      body: { name: "echo", imageName: "registry.example/provider-worker:1", shmSizeMb: 1024 },
    });
    const created = await call(`${t.service.url}/v1/endpoints`, { key: t.key, body: { name: "echo", templateId: template.body.id, workersMax: 1 } });
    expect(created.body).toMatchObject({ type: "queue", status: "READY", statusReason: null });
    const url = created.body.url as string;
    const sync = await call(`${url}/runsync`, { key: t.key, body: { input: { mode: "echo", value: "from a pod" } } });
    expect(sync.body).toMatchObject({ status: "COMPLETED", output: { value: "from a pod" } });

    const pod = containers.pods[0]!;
    const container = pod.spec!.containers[0]!;
    expect(container.image).toBe("registry.example/provider-worker:1");
    expect(containers.envs[0]).toMatchObject({ RUNPOD_POD_ID: sync.body.output.worker, RUNPOD_ENDPOINT_ID: created.body.id });
    expect(Object.keys(containers.envs[0]!).filter((k) => k.startsWith("SVC_"))).toEqual([]);
    // The worker's token is a credential: in its Secret, never a value on the Pod.
    expect(container.env!.find((e) => e.name === "RUNPOD_AI_API_KEY")?.valueFrom?.secretKeyRef?.key).toBe("RUNPOD_AI_API_KEY");
    expect(JSON.stringify(pod)).not.toContain(containers.envs[0]!.RUNPOD_AI_API_KEY);
    // Its image keeps its user; the template's /dev/shm allowance is memory mounted there.
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, readOnlyRootFilesystem: false });
    expect(container.volumeMounts).toContainEqual({ name: "shm", mountPath: "/dev/shm" });
    expect(pod.spec!.volumes).toContainEqual({ name: "shm", emptyDir: { medium: "Memory", sizeLimit: "1024Mi" } });

    const lines = await until(async () => {
      const all = ((await call(`${t!.service.url}/v1/endpoints/${created.body.id}/logs`, { key: t!.key })).body.lines as Array<{ text: string }>).map(
        (l) => l.text,
      );
      return all.some((l) => l.startsWith(`posted ${sync.body.id}`)) && all;
    }, 10_000);
    expect(lines).toContain(`taken ${sync.body.id}`);
  } finally {
    containers.stop();
  }
}, 60_000);

it("an image whose template names a registry auth is pulled with it: the worker's Secret is the Pod's image pull secret", async () => {
  t = await serviceOnFakeCluster("svc-provider-auth");
  const containers = playPods(fake!);
  try {
    const auth = await call(`${t.service.url}/v1/containerregistryauth`, {
      key: t.key,
      body: { name: "private", username: "puller", password: "s3cret-pass" },
    });
    expect(auth.status).toBe(201);
    const template = await call(`${t.service.url}/v1/templates`, {
      key: t.key,
      body: { name: "echo", imageName: "registry.example:5000/team/provider-worker:1", containerRegistryAuthId: auth.body.id },
    });
    expect(template.body.containerRegistryAuthId).toBe(auth.body.id);
    const created = await call(`${t.service.url}/v1/endpoints`, { key: t.key, body: { name: "echo", templateId: template.body.id, workersMax: 1 } });
    const sync = await call(`${created.body.url}/runsync`, { key: t.key, body: { input: { mode: "echo", value: "pulled" } } });
    expect(sync.body).toMatchObject({ status: "COMPLETED", output: { value: "pulled" } });

    const pod = containers.pods[0]!;
    const name = pod.metadata!.name!;
    expect(pod.spec!.imagePullSecrets).toEqual([{ name }]);
    expect(JSON.stringify(pod)).not.toContain("s3cret-pass");
    const secret = fake!.secrets().find((s) => s.metadata!.name === name)!;
    expect(secret.type).toBe("kubernetes.io/dockerconfigjson");
    const config = JSON.parse(Buffer.from(secret.data![".dockerconfigjson"]!, "base64").toString("utf8"));
    expect(config).toEqual({
      auths: {
        "registry.example:5000": { username: "puller", password: "s3cret-pass", auth: Buffer.from("puller:s3cret-pass").toString("base64") },
      },
    });
    // The container's variables carry no registry credential.
    expect(JSON.stringify(containers.envs[0])).not.toContain("s3cret-pass");
  } finally {
    containers.stop();
  }
}, 60_000);

it("a Pod whose image cannot be pulled ends its worker: the endpoint waits saying which pull failed and why, and its job stays queued", async () => {
  t = await serviceOnFakeCluster("svc-provider-pull");
  // The kubelet's answer to a wrong password, for every Pod the service makes.
  const refused = new Set<string>();
  const kubelet = setInterval(() => {
    for (const pod of fake!.pods()) {
      const name = pod.metadata!.name!;
      if (refused.has(name)) continue;
      refused.add(name);
      fake!.setWaiting(name, "ErrImagePull", 'failed to pull and unpack image "registry.example:5000/team/worker:1": 401 Unauthorized');
    }
  }, 50);
  try {
    const auth = await call(`${t.service.url}/v1/containerregistryauth`, { key: t.key, body: { name: "wrong", username: "puller", password: "not-it" } });
    const template = await call(`${t.service.url}/v1/templates`, {
      key: t.key,
      body: { name: "w", imageName: "registry.example:5000/team/worker:1", containerRegistryAuthId: auth.body.id },
    });
    const created = await call(`${t.service.url}/v1/endpoints`, { key: t.key, body: { name: "w", templateId: template.body.id, workersMax: 1 } });
    const job = await call(`${created.body.url}/run`, { key: t.key, body: { input: { mode: "echo", value: 1 } } });
    const waiting = await until(async () => {
      const r = (await call(`${t!.service.url}/v1/endpoints/${created.body.id}`, { key: t!.key })).body;
      return r.statusReason ? r : undefined;
    }, 20_000);
    expect([waiting.status, waiting.statusReason]).toEqual([
      "WAITING",
      `pulling "registry.example:5000/team/worker:1" failed: unauthorized (registry auth "wrong")`,
    ]);
    expect((await call(`${created.body.url}/status/${job.body.id}`, { key: t.key })).body.status).toBe("IN_QUEUE");
    // The Pod that could not start is gone, with its Secret.
    await until(async () => fake!.deletions.some((d) => refused.has(d.name)), 10_000);
    const logs = (await call(`${t.service.url}/v1/endpoints/${created.body.id}/logs`, { key: t.key })).body.lines as Array<{ text: string }>;
    expect(logs.some((l) => l.text.includes(`pulling "registry.example:5000/team/worker:1" failed: unauthorized`))).toBe(true);
  } finally {
    clearInterval(kubelet);
  }
}, 60_000);
