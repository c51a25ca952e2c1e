// The Kubernetes driver against a fake Kubernetes API server written for the tests (test/fakes): no real API
// server can run here. Pods created with svc's labels and the launch's environment; exits read from the watch
// (code from the container's termination) and ended Pods deleted; stop as a deletion with the grace period;
// adoption after a restart (running Pods adopted, ended ones reported and deleted); a dropped watch re-listed and
// watched again, an exit after the drop still seen; close() deletes what it started. The worker's output followed
// from the Pod's log into onLog (job marks read back, last lines before the Pod goes, a cut follow resumed without
// repeats, an adopted Pod's from its adoption, aborting leaves nothing open); load-balanced workers addressed at
// their Pod's IP. The worker's credentials and secret values kept off its Pod, in a Secret of its own (owned by
// the Pod, deleted when the worker ends, on close(), and as a leftover at adoption).
import { afterEach, beforeEach, expect, it } from "vitest";
import { CoreV1Api } from "@kubernetes/client-node";
import { createKubernetesDriver, type KubernetesDriverOptions } from "../../src/drivers/kubernetes.js";
import { followPodLog } from "../../src/drivers/kubernetes-logs.js";
import type { WorkerDriver, WorkerLaunch, WorkerLogLine } from "../../src/drivers/types.js";
import { jobMark, noteMark } from "../../src/runtime/output-marks.js";
import { podLabels } from "../../src/drivers/kubernetes-pod.js";
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

const driver = (session = "srv1", extra: Partial<KubernetesDriverOptions> = {}) => {
  const d = createKubernetesDriver({
    kubeConfig: fake.kubeConfig(),
    namespace: "default",
    session,
    image: "svc-worker-cpu:test",
    rewatchMs: 100,
    stopGraceMs: 2000,
    logRetryMs: 100,
    ...extra,
  });
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
  expect(env).toMatchObject({
    USER_FLAG: "on",
    SVC_WORKER_ID: "w1",
    SVC_ARTIFACT: "http://svc.svc.cluster.local:8600/_worker/v1/artifacts/abc",
    SVC_API_URL: "http://svc.svc.cluster.local:8600",
  });
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

it("close() deletes the Pods it started, and their Secrets", async () => {
  const d = driver();
  await d.start(launch("a"));
  await d.start(launch("b"));
  expect(fake.pods()).toHaveLength(2);
  expect(fake.secrets()).toHaveLength(2);
  await d.close();
  expect(fake.pods()).toHaveLength(0);
  expect(fake.secrets()).toHaveLength(0);
});

const decoded = (data: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));

it("keeps the worker's credentials and secret values off its Pod: in a Secret of its own, owned by the Pod, deleted when the worker ends", async () => {
  const handle = await driver().start(
    launch("sec1", { apiKey: "svc_owner_key", environment: { USER_FLAG: "on", DB_PASSWORD: "hunter2" }, secretNames: ["DB_PASSWORD"] }),
  );
  const [pod] = fake.pods();
  const name = pod!.metadata!.name!;
  // Nothing secret on the Pod, which anyone who may read Pods reads.
  const podText = JSON.stringify(pod);
  for (const value of ["svcw_token", "svc_owner_key", "hunter2"]) expect(podText).not.toContain(value);
  const env = pod!.spec!.containers[0]!.env!;
  expect(env.find((e) => e.name === "USER_FLAG")).toEqual({ name: "USER_FLAG", value: "on" });
  for (const key of ["SVC_WORKER_TOKEN", "SVC_API_KEY", "DB_PASSWORD"])
    expect(env.find((e) => e.name === key)).toEqual({ name: key, valueFrom: { secretKeyRef: { name, key } } });
  // The Secret holds them, labelled as its Pod and owned by it (Kubernetes collects it with the Pod).
  const [secret] = fake.secrets();
  expect(secret!.metadata!.name).toBe(name);
  expect(secret!.metadata!.labels).toEqual(pod!.metadata!.labels);
  expect(decoded(secret!.data)).toEqual({ SVC_WORKER_TOKEN: "svcw_token", SVC_API_KEY: "svc_owner_key", DB_PASSWORD: "hunter2" });
  expect(secret!.metadata!.ownerReferences).toEqual([{ apiVersion: "v1", kind: "Pod", name, uid: pod!.metadata!.uid }]);
  fake.setPhase(name, "Running");
  fake.setPhase(name, "Failed", { exitCode: 2 });
  expect(await handle.exited).toEqual({ code: 2, signal: null });
  await until(() => fake.pods().length === 0 && fake.secrets().length === 0);
});

it("adoption deletes the Secrets of ended and vanished workers, keeps those of running ones and of Pods maybe being made", async () => {
  const first = driver("srv7");
  await first.start(launch("kept"));
  await first.start(launch("ended"));
  drivers.splice(drivers.indexOf(first), 1);
  fake.dropWatches();
  const kept = podOf("kept");
  fake.setPhase(kept, "Running");
  fake.setPhase(podOf("ended"), "Succeeded", { exitCode: 0 });
  // Left by a service killed between the Secret and its Pod, long ago; and one whose Pod a replica is making now.
  const leftover = (workerId: string, minutesAgo: number, session = "srv7") =>
    fake.addSecret(
      { metadata: { name: `svc-ticker-${workerId}`, labels: podLabels({ endpointId: "ep1", workerId }, session) }, stringData: { SVC_WORKER_TOKEN: "old" } },
      { createdAt: new Date(Date.now() - minutesAgo * 60_000) },
    );
  leftover("vanished", 10);
  leftover("being-made", 0);
  leftover("strangers", 10, "srv-other");
  const found = await driver("srv7").adopt!();
  expect(found.map((f) => [f.handle.workerId, f.ended ?? false]).sort()).toEqual([
    ["ended", true],
    ["kept", false],
  ]);
  expect(
    fake
      .secrets()
      .map((x) => x.metadata!.name)
      .sort(),
  ).toEqual(["svc-ticker-being-made", kept, "svc-ticker-strangers"].sort());
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
    spawnSync(process.execPath, [join(process.cwd(), "bin", "svc.js"), "server", "--workers", "kubernetes", "--port", "0", "--data-dir", dataDir], {
      env: { ...env, ...extra },
      encoding: "utf8",
      timeout: 30_000,
    });
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

/** A launch whose output lands in `lines`. */
const logged = (workerId: string, extra: Partial<WorkerLaunch> = {}) => {
  const lines: WorkerLogLine[] = [];
  return { lines, launch: launch(workerId, { onLog: (line) => lines.push(line), ...extra }), texts: () => lines.map((l) => l.text) };
};
const podOf = (workerId: string) => fake.pods().find((p) => p.metadata!.labels!["svc.worker"] === workerId)!.metadata!.name!;

it("follows a worker Pod's log into onLog, reading the runtime's job marks, and reads its last lines before the Pod goes", async () => {
  const { lines, launch: l, texts } = logged("out1");
  const handle = await driver().start(l);
  const name = podOf("out1");
  // Written while the container starts: read once it runs (a Pending Pod's log answers 400).
  fake.writeLog(name, "runtime starting");
  fake.setPhase(name, "Running");
  fake.writeLog(name, `${jobMark("job-7")}hello from job 7\n${noteMark()}worker ready\nplain line`);
  await until(() => lines.length === 4);
  expect(lines.map(({ ts: _ts, ...rest }) => rest)).toEqual([
    { stream: "stdout", text: "runtime starting" },
    { stream: "stdout", text: "hello from job 7", jobId: "job-7" },
    { stream: "log", text: "worker ready" },
    { stream: "stdout", text: "plain line" },
  ]);
  // The container's time, not the reader's.
  expect(Math.abs(lines[0]!.ts - Date.now())).toBeLessThan(5000);
  // Its last words and its end at once, while the follow was cut (read again): the line reaches onLog before the
  // exit is reported and the Pod (with its log) deleted.
  fake.dropLogStreams();
  fake.writeLog(name, `${jobMark("job-7")}Error: the last line`);
  fake.setPhase(name, "Failed", { exitCode: 1 });
  expect(await handle.exited).toEqual({ code: 1, signal: null });
  expect(lines.at(-1)).toMatchObject({ text: "Error: the last line", jobId: "job-7" });
  expect(texts()).toHaveLength(5);
  await until(() => fake.pods().length === 0 && fake.openLogStreams() === 0);
});

it("reads the output of a Pod that ended before it was seen running (a crash at start)", async () => {
  const { launch: l, texts } = logged("crash");
  const handle = await driver().start(l);
  const name = podOf("crash");
  fake.writeLog(name, "Error: Cannot find module 'missing'");
  fake.setPhase(name, "Failed", { exitCode: 1, podIP: null });
  expect(await handle.exited).toEqual({ code: 1, signal: null });
  expect(texts()).toEqual(["Error: Cannot find module 'missing'"]);
});

it("a follow cut short (the connection dropped) is resumed: no line lost, none repeated", async () => {
  const { lines, launch: l, texts } = logged("cut");
  await driver().start(l);
  const name = podOf("cut");
  fake.setPhase(name, "Running");
  fake.writeLog(name, "one\ntwo");
  await until(() => lines.length === 2 && fake.openLogStreams() === 1);
  fake.dropLogStreams();
  // Written while no follow is open, in the same second as the lines already read.
  fake.writeLog(name, "three");
  await until(() => lines.length >= 3);
  fake.writeLog(name, "four");
  await until(() => lines.length >= 4);
  await new Promise((r) => setTimeout(r, 300));
  expect(texts()).toEqual(["one", "two", "three", "four"]);
});

it("a follow stopped mid-stream is aborted without an error and leaves no request open; a Pending Pod is waited for, an unknown one given up", async () => {
  const kc = fake.kubeConfig();
  const api = kc.makeApiClient(CoreV1Api);
  // A Pod no driver follows: the only log request is this test's.
  const name = "direct";
  await api.createNamespacedPod({ namespace: "default", body: { metadata: { name }, spec: { containers: [{ name: "worker", image: "x" }] } } });
  const notes: string[] = [];
  const lines: WorkerLogLine[] = [];
  // Still Pending: the API answers 400 ("waiting to start") until it runs; the follow waits and reads it then.
  const follow = followPodLog({
    kc,
    api,
    namespace: "default",
    pod: name,
    container: "worker",
    onLog: (line) => lines.push(line),
    retryMs: 50,
    log: (m) => notes.push(m),
  });
  await new Promise((r) => setTimeout(r, 200));
  fake.setPhase(name, "Running");
  fake.writeLog(name, "first");
  await until(() => lines.length === 1 && fake.openLogStreams() === 1);
  follow.stop();
  await follow.done;
  await until(() => fake.openLogStreams() === 0);
  fake.writeLog(name, "after the stop");
  await new Promise((r) => setTimeout(r, 200));
  expect(lines.map((l) => l.text)).toEqual(["first"]);
  // 400s while Pending are expected, not worth a note.
  expect(notes).toEqual([]);
  // An unknown Pod: 404, nothing to follow.
  const gone = followPodLog({
    kc,
    api,
    namespace: "default",
    pod: "no-such-pod",
    container: "worker",
    onLog: () => undefined,
    retryMs: 50,
    log: (m) => notes.push(m),
  });
  await gone.done;
  expect(notes).toEqual([]);
});

it("the fake's log endpoint answers as the API server does: plain text, 404 for an unknown Pod, 400 while Pending", async () => {
  await driver().start(launch("raw"));
  const name = podOf("raw");
  const get = (pod: string, query = "") => fetch(`${fake.url}/api/v1/namespaces/default/pods/${pod}/log?container=worker${query}`);
  const pending = await get(name);
  expect(pending.status).toBe(400);
  expect(await pending.json()).toMatchObject({
    kind: "Status",
    reason: "BadRequest",
    message: `container "worker" in pod "${name}" is waiting to start: ContainerCreating`,
  });
  expect((await get("nope")).status).toBe(404);
  expect((await fetch(`${fake.url}/api/v1/namespaces/default/pods/${name}/log?container=other`)).status).toBe(400);
  fake.setPhase(name, "Running");
  fake.writeLog(name, "a\nb");
  const plain = await get(name);
  expect(plain.headers.get("content-type")).toBe("text/plain");
  expect(await plain.text()).toBe("a\nb\n");
  expect(await (await get(name, "&timestamps=true")).text()).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z a\n\S+Z b\n$/);
});

it("an adopted Pod's output is followed from its adoption on", async () => {
  const first = driver("srv-logs");
  await first.start(launch("kept"));
  const name = podOf("kept");
  fake.setPhase(name, "Running");
  fake.writeLog(name, "read by the earlier service");
  drivers.splice(drivers.indexOf(first), 1);
  fake.dropWatches();
  fake.dropLogStreams();
  await new Promise((r) => setTimeout(r, 20));
  const second = driver("srv-logs");
  const got: Array<{ endpointId: string; workerId: string; text: string; jobId?: string }> = [];
  const [adopted] = await second.adopt!((endpointId, workerId, line) =>
    got.push({ endpointId, workerId, text: line.text, ...(line.jobId ? { jobId: line.jobId } : {}) }),
  );
  expect(adopted!.handle.workerId).toBe("kept");
  fake.writeLog(name, `${jobMark("job-9")}after the adoption`);
  await until(() => got.length === 1);
  fake.setPhase(name, "Succeeded", { exitCode: 0 });
  await adopted!.handle.exited;
  expect(got).toEqual([{ endpointId: "ep1", workerId: "kept", text: "after the adoption", jobId: "job-9" }]);
});

it("a load-balanced worker is started and addressed at its Pod's IP, on the port its server listens on", async () => {
  const pending = driver().start(launch("lb1", { loadBalanced: true }));
  await until(() => fake.pods().length === 1);
  const pod = fake.pods()[0]!;
  const container = pod.spec!.containers[0]!;
  expect(container.ports).toEqual([{ name: "http", containerPort: 8080 }]);
  const env = Object.fromEntries(container.env!.map((e) => [e.name, e.value]));
  expect(env).toMatchObject({ SVC_HTTP_HOST: "0.0.0.0", SVC_HTTP_PORT: "8080" });
  // Not before the Pod has an IP.
  let settled = false;
  void pending.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 150));
  expect(settled).toBe(false);
  fake.setPhase(pod.metadata!.name!, "Running", { podIP: "10.244.3.17" });
  const handle = await pending;
  expect(handle.address).toBe("http://10.244.3.17:8080");
  // A queue worker has none.
  const queue = await driver().start(launch("q1"));
  fake.setPhase(podOf("q1"), "Running");
  expect(queue.address).toBeUndefined();
});

it("a load-balanced Pod that gets no IP in time, or ends without one, fails its start clearly and is deleted", async () => {
  const d = driver("srv1", { podAddressTimeoutMs: 300 });
  await expect(d.start(launch("lb-slow", { loadBalanced: true }))).rejects.toThrow(
    /Pod svc-ticker-lb-slow of load-balanced endpoint ticker cannot be reached: it got no IP within 0.3 s \(not scheduled, or its network not set up\)$/,
  );
  await until(() => fake.pods().length === 0);
  const dying = d.start(launch("lb-dead", { loadBalanced: true }));
  await until(() => fake.pods().length === 1);
  fake.setPhase(podOf("lb-dead"), "Failed", { exitCode: 2, podIP: null });
  await expect(dying).rejects.toThrow(/it ended \(exit code 2, signal null\) before it had an IP/);
  await until(() => fake.pods().length === 0);
});

it("adoption gives a load-balanced Pod's address; one with no IP yet is deleted and reported ended", async () => {
  const first = driver("srv-lb");
  const started = first.start(launch("lb-run", { loadBalanced: true }));
  await until(() => fake.pods().length === 1);
  fake.setPhase(podOf("lb-run"), "Running", { podIP: "10.244.9.9" });
  await started;
  void first.start(launch("lb-pending", { loadBalanced: true })).catch(() => undefined);
  await until(() => fake.pods().length === 2);
  drivers.splice(drivers.indexOf(first), 1);
  fake.dropWatches();
  const found = await driver("srv-lb").adopt!();
  const byId = Object.fromEntries(found.map((f) => [f.handle.workerId, f]));
  expect(byId["lb-run"]!.handle.address).toBe("http://10.244.9.9:8080");
  expect(byId["lb-run"]!.ended).toBeUndefined();
  expect(byId["lb-pending"]!.ended).toBe(true);
  expect(fake.pods().map((p) => p.metadata!.labels!["svc.worker"])).toEqual(["lb-run"]);
});

it("a log the API server fails to give is noted once, and asked for again less and less often", async () => {
  const { createServer } = await import("node:http");
  let requests = 0;
  // An API server in trouble: every log request answers 500 with a Status.
  const failing = createServer((_req, res) => {
    requests++;
    res.writeHead(500, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message: "etcdserver: request timed out", code: 500 }));
  });
  await new Promise<void>((r) => failing.listen(0, "127.0.0.1", r));
  try {
    const kc = fake.kubeConfig();
    const server = `http://127.0.0.1:${(failing.address() as { port: number }).port}`;
    kc.loadFromOptions({
      clusters: [{ name: "failing", server, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "failing", cluster: "failing", user: "u" }],
      currentContext: "failing",
    });
    const notes: string[] = [];
    const follow = followPodLog({
      kc,
      api: kc.makeApiClient(CoreV1Api),
      namespace: "default",
      pod: "p",
      container: "worker",
      onLog: () => undefined,
      retryMs: 20,
      log: (m) => notes.push(m),
    });
    await new Promise((r) => setTimeout(r, 700));
    follow.stop();
    await follow.done;
    expect(notes).toEqual(["could not read the log of Pod p: etcdserver: request timed out (HTTP 500)"]);
    // 20, 40, 80, 160, 320 ms apart: about 6 requests in 0.7 s, not one every 20 ms.
    expect(requests).toBeGreaterThanOrEqual(3);
    expect(requests).toBeLessThanOrEqual(8);
  } finally {
    failing.closeAllConnections();
    await new Promise((r) => failing.close(r));
  }
});

it("a Pod or Secret Kubernetes refuses fails the start with the API's own message, in one line; a refused Pod's Secret is deleted", async () => {
  const d = driver();
  await d.start(launch("twice"));
  await expect(d.start(launch("twice"))).rejects.toThrow(
    /^Kubernetes refused the Secret of endpoint ticker's worker: secrets "svc-ticker-twice" already exists \(HTTP 409\)$/,
  );
  // A Pod of that name made by someone else: the Secret is made, the Pod refused, the Secret deleted again.
  const api = fake.kubeConfig().makeApiClient(CoreV1Api);
  await api.createNamespacedPod({
    namespace: "default",
    body: { metadata: { name: "svc-ticker-taken" }, spec: { containers: [{ name: "worker", image: "x" }] } },
  });
  await expect(d.start(launch("taken"))).rejects.toThrow(
    /^Kubernetes refused the Pod of endpoint ticker: pods "svc-ticker-taken" already exists \(HTTP 409\)$/,
  );
  expect(fake.secrets().map((x) => x.metadata!.name)).toEqual(["svc-ticker-twice"]);
});

it("a Pod started while the driver lists its Pods again (after a dropped watch) is not taken for vanished", async () => {
  const d = driver();
  await d.start(launch("before"));
  await new Promise((r) => setTimeout(r, 100));
  const release = fake.holdLists();
  fake.dropWatches();
  // The re-list (rewatchMs 100) is asked while no answer comes; a worker is started meanwhile.
  await new Promise((r) => setTimeout(r, 250));
  const later = await d.start(launch("during"));
  let ended = false;
  void later.exited.then(() => (ended = true));
  release();
  await new Promise((r) => setTimeout(r, 300));
  expect(ended).toBe(false);
  expect(
    fake
      .pods()
      .map((p) => p.metadata!.labels!["svc.worker"])
      .sort(),
  ).toEqual(["before", "during"]);
  // And it is still watched: its end is seen.
  fake.setPhase(podOf("during"), "Succeeded", { exitCode: 0 });
  expect(await later.exited).toEqual({ code: 0, signal: null });
});

it("close() leaves no log request open, even for a Pod that outlasts the wait for its end", async () => {
  const d = driver("srv1", { stopGraceMs: 100 });
  await d.start(launch("slow"));
  const name = podOf("slow");
  fake.setPhase(name, "Running");
  await until(() => fake.openLogStreams() === 1);
  // Its container takes longer than the grace period to go: the Pod stays, marked for deletion, its log open.
  const release = fake.holdDeletions();
  await d.close();
  expect(fake.pods().map((p) => [p.metadata!.name, Boolean(p.metadata!.deletionTimestamp)])).toEqual([[name, true]]);
  await until(() => fake.openLogStreams() === 0, 2000);
  release();
}, 20_000);

const volume = { id: "vol0123456789ab", sizeGb: 10 };

it("a worker with a network volume: its ReadWriteMany claim made before its Pod and mounted, grown with the volume, deleted with it", async () => {
  const d = driver("srv1", { volumes: { storageClass: "nfs-rwx" } });
  await d.start(launch("w1", { volume, volumePath: "/data/volumes/vol0123456789ab" }));
  const [claim] = fake.claims();
  expect(claim!.metadata!.name).toBe("svc-vol-vol0123456789ab");
  expect(claim!.metadata!.labels).toEqual({ "svc.managed": "true", "svc.session": "srv1", "svc.volume": "vol0123456789ab" });
  expect(claim!.spec).toEqual({ accessModes: ["ReadWriteMany"], storageClassName: "nfs-rwx", resources: { requests: { storage: "10Gi" } } });
  const [pod] = fake.pods();
  expect(fake.created.indexOf("pvc/svc-vol-vol0123456789ab")).toBeLessThan(fake.created.indexOf(`pod/${pod!.metadata!.name}`));
  expect(pod!.spec!.volumes).toContainEqual({ name: "network-volume", persistentVolumeClaim: { claimName: "svc-vol-vol0123456789ab" } });
  // A later worker of the volume, grown meanwhile: the one claim, its request grown.
  await d.start(launch("w2", { volume: { ...volume, sizeGb: 20 }, volumePath: "/data/volumes/vol0123456789ab" }));
  expect(fake.created.filter((c) => c.startsWith("pvc/"))).toHaveLength(1);
  expect(fake.claims()[0]!.spec!.resources!.requests!.storage).toBe("20Gi");
  // Grown through the API (PATCH size), and never shrunk by a start that carries an older size.
  await d.resizeVolume!({ ...volume, sizeGb: 30 });
  await d.start(launch("w3", { volume, volumePath: "/data/volumes/vol0123456789ab" }));
  expect(fake.claims()[0]!.spec!.resources!.requests!.storage).toBe("30Gi");
  await d.removeVolume!(volume.id);
  expect(fake.claims()).toEqual([]);
  // Deleting it again (or a volume no worker ever mounted) is no error.
  await d.removeVolume!(volume.id);
  await d.resizeVolume!({ ...volume, sizeGb: 40 });
  expect(fake.claims()).toEqual([]);
});

it("refuses a worker with a network volume without a StorageClass, or with no node in its volume's data center", async () => {
  const withVolume = (workerId: string, dataCenter?: string) =>
    launch(workerId, { volume, volumePath: "/data/volumes/vol0123456789ab", placement: { gpus: 0, ...(dataCenter ? { dataCenter } : {}) } });
  await expect(driver("srv1").start(withVolume("w1"))).rejects.toThrow(/mounts a network volume.*set SVC_K8S_STORAGE_CLASS/);
  const d = driver("srv2", { volumes: { storageClass: "nfs-rwx" } });
  fake.setNodes([
    { metadata: { name: "n1", labels: { "svc.data-center": "eu-1" } }, spec: {} },
    { metadata: { name: "n2", labels: { "svc.data-center": "us-1" } }, spec: { unschedulable: true } },
  ]);
  await expect(d.start(withVolume("w2", "us-1"))).rejects.toThrow(/data center us-1.*kubectl label node <node> svc.data-center=us-1/);
  await expect(d.start(withVolume("w3", "ap-1"))).rejects.toThrow(/could never be placed/);
  expect(fake.created).toEqual([]);
  await d.start(withVolume("w4", "eu-1"));
  expect(fake.created.map((c) => c.split("/")[0])).toEqual(["pvc", "secret", "pod"]);
});

it("an endpoint naming models: its Pod fetches them into the node's cache first; a failed fetch is the worker's start failure", async () => {
  const d = driver("srv1", { models: { path: "/var/lib/svc-models", image: "svc-server:test" } });
  expect(d.nodeModelCache).toBe(true);
  const handle = await d.start(launch("wm", { models: ["acme/missing@main"], modelHub: { url: "http://hub.internal:8080", token: "hf_token" } }));
  const [pod] = fake.pods();
  const name = pod!.metadata!.name!;
  expect(pod!.spec!.volumes).toContainEqual({ name: "svc-models", hostPath: { path: "/var/lib/svc-models", type: "DirectoryOrCreate" } });
  const [init] = pod!.spec!.initContainers!;
  expect(init).toMatchObject({
    name: "svc-models",
    image: "svc-server:test",
    args: ["models", "fetch", "--cache", "/svc-models", "--hub", "http://hub.internal:8080", "acme/missing@main"],
    volumeMounts: [{ name: "svc-models", mountPath: "/svc-models" }],
    env: [{ name: "SVC_MODEL_HUB_TOKEN", valueFrom: { secretKeyRef: { name, key: "svc-model-hub-token" } } }],
  });
  const worker = pod!.spec!.containers[0]!;
  expect(worker.volumeMounts).toContainEqual({ name: "svc-models", mountPath: "/svc-models", readOnly: true });
  expect(Object.fromEntries(worker.env!.map((e) => [e.name, e.value]))).toMatchObject({ HF_HUB_CACHE: "/svc-models/hub", HF_HUB_OFFLINE: "1" });
  // The token reached the API server only in the worker's Secret.
  expect(JSON.stringify(pod)).not.toContain("hf_token");
  expect(Buffer.from(fake.secrets()[0]!.data!["svc-model-hub-token"]!, "base64").toString()).toBe("hf_token");

  fake.failInit(
    name,
    "svc-models",
    1,
    "error: Model acme/missing@main cannot be fetched from http://hub.internal:8080: not_found: the hub has no revision (404)\nCheck the name.\n",
  );
  const exit = await handle.exited;
  expect(exit.startFailure).toBe(
    "the fetch of its models failed (exit code 1): Model acme/missing@main cannot be fetched from http://hub.internal:8080: not_found: the hub has no revision (404)",
  );
  await until(() => fake.pods().length === 0);

  // Without the node cache setting: no fetcher, no cache, and the driver leaves models to the service's host.
  const plain = driver("srv2");
  expect(plain.nodeModelCache).toBe(false);
  await plain.start(launch("wp", { models: ["acme/tiny@main"] }));
  const other = fake.pods().find((p) => p.metadata!.labels!["svc.worker"] === "wp")!;
  expect(other.spec!.initContainers).toBeUndefined();
});
