// The Kubernetes driver against a fake Kubernetes API server written for the tests (test/fakes): no real API
// server can run here. Pods created with svc's labels and the launch's environment; exits read from the watch
// (code from the container's termination) and ended Pods deleted; stop as a deletion with the grace period;
// adoption after a restart (running Pods adopted, ended ones reported and deleted); a dropped watch re-listed and
// watched again, an exit after the drop still seen; close() deletes what it started.
import { afterEach, beforeEach, expect, it } from "vitest";
import { createKubernetesDriver } from "../../src/drivers/kubernetes.js";
import type { WorkerDriver, WorkerLaunch } from "../../src/drivers/types.js";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/fake-kube-api-server.js";

let fake: FakeKubeApiServer;
const drivers: WorkerDriver[] = [];

beforeEach(async () => {
  fake = await startFakeKubeApiServer();
});
afterEach(async () => {
  for (const d of drivers.splice(0)) await d.close().catch(() => undefined);
  await fake.close();
});

const driver = (session = "srv1") => {
  const d = createKubernetesDriver({ kubeConfig: fake.kubeConfig(), namespace: "default", session, image: "svc-worker-cpu:test", rewatchMs: 100, stopGraceMs: 2000 });
  drivers.push(d);
  return d;
};
const launch = (workerId: string, extra: Partial<WorkerLaunch> = {}): WorkerLaunch => ({
  workerId,
  endpointId: "ep1",
  endpointName: "ticker",
  app: "app",
  env: "prod",
  artifactPath: "/data/artifacts/abc.tar.gz",
  artifactUrl: "http://svc.svc.cluster.local:8600/_worker/v1/artifacts/abc",
  apiUrl: "http://svc.svc.cluster.local:8600",
  workerToken: "svcw_token",
  environment: { USER_FLAG: "on" },
  maxConcurrency: 1,
  revision: "rev-1",
  computeType: "CPU",
  gpuTypeIds: [],
  onLog: () => undefined,
  ...extra,
});
async function until<T>(fn: () => T | undefined | false, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

it("creates a labelled Pod with the launch's environment and reads its exit from the watch, then deletes it", async () => {
  const d = driver();
  const handle = await d.start(launch("w1"));
  const [pod] = fake.pods();
  expect(pod!.metadata!.labels).toEqual({ "svc.managed": "true", "svc.session": "srv1", "svc.endpoint": "ep1", "svc.worker": "w1" });
  const env = Object.fromEntries(pod!.spec!.containers[0]!.env!.map((e) => [e.name, e.value]));
  expect(env).toMatchObject({ USER_FLAG: "on", SVC_WORKER_ID: "w1", SVC_ARTIFACT: "http://svc.svc.cluster.local:8600/_worker/v1/artifacts/abc", SVC_API_URL: "http://svc.svc.cluster.local:8600" });
  fake.setPhase(pod!.metadata!.name!, "Running");
  fake.setPhase(pod!.metadata!.name!, "Succeeded", { exitCode: 0 });
  expect(await handle.exited).toEqual({ code: 0, signal: null });
  await until(() => fake.pods().length === 0);
});

it("reads a failed Pod's exit code and cleans the Pod up", async () => {
  const handle = await driver().start(launch("w2"));
  const name = fake.pods()[0]!.metadata!.name!;
  fake.setPhase(name, "Failed", { exitCode: 3 });
  expect(await handle.exited).toEqual({ code: 3, signal: null });
  await until(() => fake.pods().length === 0);
  expect(fake.deletions).toContainEqual({ name, gracePeriodSeconds: 0 });
});

it("stops a worker by deleting its Pod with the grace period", async () => {
  const handle = await driver().start(launch("w3"));
  const name = fake.pods()[0]!.metadata!.name!;
  fake.setPhase(name, "Running");
  expect(await handle.stop(4000)).toEqual({ code: null, signal: null });
  expect(fake.deletions).toEqual([{ name, gracePeriodSeconds: 4 }]);
});

it("adopts after a restart: a running Pod is watched again, an ended one is reported and deleted", async () => {
  const first = driver("srv9");
  await first.start(launch("running"));
  await first.start(launch("ended"));
  const [running, ended] = fake.pods().map((p) => p.metadata!.name!) as [string, string];
  fake.setPhase(running, "Running");
  fake.setPhase(ended, "Succeeded", { exitCode: 0 });
  await until(() => fake.pods().length === 1);
  // The "ended" one was already cleaned by the first driver; make another end while no driver watches.
  await first.start(launch("ended-later"));
  const later = fake.pods().find((p) => p.metadata!.labels!["svc.worker"] === "ended-later")!.metadata!.name!;
  drivers.splice(drivers.indexOf(first), 1);
  // The service dies without closing its driver (SIGKILL): the Pods stay. One ends meanwhile.
  fake.dropWatches();
  fake.setPhase(later, "Failed", { exitCode: 137 });

  const second = driver("srv9");
  const found = await second.adopt!();
  const byId = Object.fromEntries(found.map((f) => [f.handle.workerId, f]));
  expect(Object.keys(byId).sort()).toEqual(["ended-later", "running"]);
  expect(byId.running).toMatchObject({ endpointId: "ep1", revision: "rev-1" });
  expect(byId.running!.ended).toBeUndefined();
  expect(byId["ended-later"]!.ended).toBe(true);
  expect(await byId["ended-later"]!.handle.exited).toEqual({ code: 137, signal: null });
  expect(fake.pods().map((p) => p.metadata!.name)).toEqual([running]);
  // The adopted one is watched: its exit is seen.
  fake.setPhase(running, "Succeeded", { exitCode: 0 });
  expect(await byId.running!.handle.exited).toEqual({ code: 0, signal: null });
  // Another service's Pods are not its own.
  const stranger = driver("srv-other");
  expect(await stranger.adopt!()).toEqual([]);
});

it("watches again after the watch drops, and still sees an exit that happened in between", async () => {
  const handle = await driver().start(launch("w5"));
  const name = fake.pods()[0]!.metadata!.name!;
  await new Promise((r) => setTimeout(r, 200));
  fake.dropWatches();
  // Ends while no watch is open: the re-list finds it.
  fake.setPhase(name, "Succeeded", { exitCode: 0 });
  expect(await handle.exited).toEqual({ code: 0, signal: null });
});

it("close() deletes the Pods it started", async () => {
  const d = driver();
  await d.start(launch("a"));
  await d.start(launch("b"));
  expect(fake.pods()).toHaveLength(2);
  await d.close();
  expect(fake.pods()).toHaveLength(0);
});

it("svc server --workers kubernetes says what it needs: the cluster address, then an image every node can pull", async () => {
  const { spawnSync } = await import("node:child_process");
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dataDir = mkdtempSync(join(tmpdir(), "svc-k8s-cli-"));
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: "k8s-cli-key" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") && k !== "SVC_API_KEY") delete env[k];
  const run = (extra: Record<string, string>) =>
    spawnSync(process.execPath, [join(process.cwd(), "bin", "svc.js"), "server", "--workers", "kubernetes", "--port", "0", "--data-dir", dataDir], { env: { ...env, ...extra }, encoding: "utf8", timeout: 30_000 });
  try {
    const noAddress = run({});
    expect(noAddress.status).toBe(1);
    expect(noAddress.stderr).toMatch(/SVC_CLUSTER_URL/);
    const noImage = run({ SVC_CLUSTER_URL: "http://svc.svc:8600" });
    expect(noImage.status).toBe(1);
    expect(noImage.stderr).toMatch(/SVC_WORKER_REGISTRY=host:port .*or SVC_K8S_IMAGE/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
