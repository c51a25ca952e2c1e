import { describe, expect, it } from "vitest";
import { dnsLabel, podName, workerPod, type PodPlan } from "./kubernetes-pod.js";
import type { WorkerLaunch } from "./types.js";

const launch = (extra: Partial<WorkerLaunch> = {}): WorkerLaunch => ({
  workerId: "w1abc",
  endpointId: "ep1",
  endpointName: "Text_Embedder",
  app: "app",
  env: "prod",
  artifactPath: "/data/artifacts/abc.tar.gz",
  artifactUrl: "http://svc.svc:8600/_worker/v1/artifacts/abc",
  apiUrl: "http://svc.svc:8600",
  workerToken: "svcw_token",
  apiKey: "svc_key",
  environment: { USER_FLAG: "on", SVC_WORKER_TOKEN: "user-cannot-override" },
  maxConcurrency: 2,
  revision: "rev-1",
  computeType: "CPU",
  gpuTypeIds: [],
  onLog: () => undefined,
  ...extra,
});
const plan: PodPlan = { image: "reg:5000/svc-worker-cpu@sha256:aa", session: "srv1", gpuTypeLabel: "svc.gpu-type", cpu: "2", memory: "4Gi", claimFor: (v) => `svc-vol-${v}`, terminationGraceSeconds: 10 };

describe("workerPod", () => {
  it("a CPU worker: never restarted, labelled, its requests and limits, the artifact by URL, protocol variables winning", () => {
    const pod = workerPod(launch(), plan);
    expect(pod.metadata).toEqual({
      name: "svc-text-embedder-w1abc",
      labels: { "svc.managed": "true", "svc.session": "srv1", "svc.endpoint": "ep1", "svc.worker": "w1abc" },
      annotations: { "svc.revision": "rev-1" },
    });
    expect(pod.spec!.restartPolicy).toBe("Never");
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(10);
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    const [container] = pod.spec!.containers;
    expect(container!.image).toBe("reg:5000/svc-worker-cpu@sha256:aa");
    expect(container!.resources).toEqual({ requests: { cpu: "2", memory: "4Gi" }, limits: { cpu: "2", memory: "4Gi" } });
    const env = Object.fromEntries(container!.env!.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ USER_FLAG: "on", SVC_WORKER_TOKEN: "svcw_token", SVC_ARTIFACT: "http://svc.svc:8600/_worker/v1/artifacts/abc", SVC_API_URL: "http://svc.svc:8600", SVC_WORKER_REVISION: "rev-1" });
    expect(Object.values(env).some((v) => String(v).includes("/data/artifacts"))).toBe(false);
    expect(pod.spec!.affinity).toBeUndefined();
    expect(pod.spec!.volumes).toBeUndefined();
  });

  it("a GPU worker: one nvidia.com/gpu, its GPU types as required node affinity", () => {
    const pod = workerPod(launch({ computeType: "GPU", gpuTypeIds: ["A100", "H100"] }), plan);
    expect(pod.spec!.containers[0]!.resources!.limits).toEqual({ cpu: "2", memory: "4Gi", "nvidia.com/gpu": "1" });
    expect(pod.spec!.affinity).toEqual({
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["A100", "H100"] }] }] } },
    });
    // Any GPU: no affinity, the device plugin's resource alone.
    expect(workerPod(launch({ computeType: "GPU", gpuTypeIds: ["ANY"] }), plan).spec!.affinity).toBeUndefined();
  });

  it("a network volume: its claim mounted at the volume path", () => {
    const pod = workerPod(launch({ volumeName: "models" }), plan);
    expect(pod.spec!.volumes).toEqual([{ name: "network-volume", persistentVolumeClaim: { claimName: "svc-vol-models" } }]);
    expect(pod.spec!.containers[0]!.volumeMounts).toEqual([{ name: "network-volume", mountPath: "/svc-volume" }]);
    expect(pod.spec!.containers[0]!.env).toContainEqual({ name: "SVC_VOLUME_PATH", value: "/svc-volume" });
  });

  it("refuses a launch whose artifact a Pod could not fetch", () => {
    expect(() => workerPod(launch({ artifactUrl: undefined }), plan)).toThrow(/no URL a Pod could fetch/);
  });
});

describe("names", () => {
  it("are DNS-1123 labels", () => {
    expect(dnsLabel("Text_Embedder!!")).toBe("text-embedder");
    expect(dnsLabel("---")).toBe("x");
    expect(podName({ endpointName: "A".repeat(50), workerId: "w".repeat(80) })).toMatch(/^svc-a{20}-w{40}$/);
  });
});
