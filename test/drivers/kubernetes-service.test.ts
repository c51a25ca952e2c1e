// The service with Kubernetes workers, against the fake Kubernetes API server written for the tests (no real API
// server runs here): the scaler starts a Pod for a job; this test plays that Pod's container (it registers with the
// credentials the Pod was given, takes the job, prints as the runtime does with SVC_OUTPUT_CAPTURED=1, completes
// it); what it printed reaches the job's logs through the driver following the Pod's log. A user's secret reaches
// the container through the worker's Kubernetes Secret (read as the kubelet does), never as a value on the Pod.
import { afterEach, expect, it } from "vitest";
import type { V1Pod } from "@kubernetes/client-node";
import { createKubernetesDriver } from "../../src/drivers/kubernetes.js";
import { jobMark } from "../../src/runtime/output-marks.js";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "../service/helpers.js";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/fake-kube-api-server.js";

let fake: FakeKubeApiServer | undefined;
let t: TestService | undefined;
afterEach(async () => {
  await t?.close();
  await fake?.close();
});

/**
 * Plays every Pod's container: it runs, registers as the runtime would with the credentials the Pod was given,
 * and runs the jobs it takes, printing (in its Pod's log) as the runtime does when its output is captured.
 */
function playPods(f: FakeKubeApiServer, api: string) {
  const played = new Set<string>();
  const envs: Array<Record<string, string>> = [];
  const pods: V1Pod[] = [];
  let stopped = false;
  const play = async (name: string, env: Record<string, string>) => {
    f.setPhase(name, "Running");
    f.writeLog(name, "runtime: loading the artifact");
    const worker = new ProtocolWorker(api, env.SVC_WORKER_ID!, env.SVC_WORKER_TOKEN!);
    await worker.register();
    while (!stopped && f.pods().some((p) => p.metadata!.name === name)) {
      const jobs = await worker.take(1, 300).catch(() => []);
      for (const job of jobs) {
        f.writeLog(name, `${jobMark(job.id)}working for ${job.input.who}\n${jobMark(job.id)}second line`);
        await worker.done([{ jobId: job.id, lease: job.lease, status: "COMPLETED", output: { ok: true } }]);
      }
    }
  };
  const timer = setInterval(() => {
    for (const pod of f.pods()) {
      const name = pod.metadata!.name!;
      if (played.has(name)) continue;
      played.add(name);
      // As the kubelet gives them: a variable from a Secret's key is read from that Secret.
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
      envs.push(env);
      pods.push(pod);
      void play(name, env).catch(() => undefined);
    }
  }, 50);
  return {
    envs,
    pods,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

it("a job's output, printed in its worker Pod, reaches the job's logs through the Kubernetes driver", async () => {
  fake = await startFakeKubeApiServer();
  const driver = createKubernetesDriver({
    kubeConfig: fake.kubeConfig(),
    namespace: "default",
    session: "svc-it",
    image: "svc-worker-cpu:test",
    rewatchMs: 100,
    logRetryMs: 100,
    stopGraceMs: 1000,
  });
  t = await startTestService({ driver });
  const containers = playPods(fake, t.service.url);
  try {
    const set = await call(`${t.service.url}/v1/secrets/DB_PASSWORD`, { method: "PUT", key: t.key, body: { value: "hunter2-k8s" } });
    expect(set.status).toBe(201);
    const [endpoint] = await t.service.deploy({
      app: "k8s",
      env: "test",
      artifactPath: t.artifact,
      manifest: manifest({ work: resource({ env: { PLAIN_FLAG: "on" }, secrets: ["DB_PASSWORD"], instanceIds: ["cpu3c-2-4"] }) }),
    });
    const { body: submitted } = await call(`${endpoint!.url}/runsync`, { key: t.key, body: { input: { who: "pod" } } });
    expect(submitted).toMatchObject({ status: "COMPLETED", output: { ok: true } });
    expect(containers.envs[0]!.SVC_OUTPUT_CAPTURED).toBe("1");
    // The user's secret reaches the worker through its Pod's Secret, never as a value on the Pod.
    expect(containers.envs[0]).toMatchObject({ DB_PASSWORD: "hunter2-k8s", PLAIN_FLAG: "on" });
    const podEnv = containers.pods[0]!.spec!.containers[0]!.env!;
    expect(podEnv.find((e) => e.name === "DB_PASSWORD")?.valueFrom?.secretKeyRef?.key).toBe("DB_PASSWORD");
    expect(podEnv.find((e) => e.name === "PLAIN_FLAG")?.value).toBe("on");
    expect(JSON.stringify(containers.pods[0])).not.toContain("hunter2-k8s");
    // Sized by the endpoint's CPU instance (2 vCPUs, 4 GB), not the driver's defaults.
    expect(containers.pods[0]!.spec!.containers[0]!.resources).toEqual({ requests: { cpu: "2", memory: "4096Mi" }, limits: { cpu: "2", memory: "4096Mi" } });
    const lines = await until(async () => {
      const body = (await call(`${t!.service.url}/v1/endpoints/${endpoint!.id}/logs?job=${submitted.id}`, { key: t!.key })).body as {
        lines: Array<{ text: string; jobId: string | null }>;
      };
      return body.lines.length >= 2 && body.lines;
    }, 10_000);
    expect(lines.map((l) => [l.text, l.jobId])).toEqual([
      ["working for pod", submitted.id],
      ["second line", submitted.id],
    ]);
    // The worker's own lines are the endpoint's, not a job's; no mark is left in what is stored.
    const all = (await call(`${t.service.url}/v1/endpoints/${endpoint!.id}/logs`, { key: t.key })).body.lines as Array<{ text: string; jobId: string | null }>;
    expect(all).toContainEqual(expect.objectContaining({ text: "runtime: loading the artifact", jobId: null }));
    expect(all.every((l) => !l.text.includes("\x1b]svc;"))).toBe(true);
  } finally {
    containers.stop();
  }
}, 60_000);
