import { describe, expect, it } from "vitest";
import { dnsLabel, exitOfPod, podName, workerPod, workerSecret, type PodPlan } from "./kubernetes-pod.js";
import type { V1Pod } from "@kubernetes/client-node";
import type { WorkerLaunch } from "./types.js";
import { placementOf } from "./placement.js";

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
const plan: PodPlan = {
  image: "reg:5000/svc-worker-cpu@sha256:aa",
  session: "srv1",
  gpuTypeLabel: "svc.gpu-type",
  cpu: "2",
  memory: "4Gi",
  claimFor: (v) => `svc-vol-${v}`,
  terminationGraceSeconds: 10,
};

describe("workerPod", () => {
  it("a provider worker image: no artifact needed, its token in the Secret, the volume at /runpod-volume too, no shm unless allowed", () => {
    const provider = launch({ image: "acme/worker:1", protocol: "provider", heartbeatMs: 2000, artifactUrl: undefined, volume: { id: "vol1", sizeGb: 10 } });
    const pod = workerPod(provider, { ...plan, image: "acme/worker:1" });
    const container = pod.spec!.containers[0]!;
    expect(container.volumeMounts!.map((m) => [m.name, m.mountPath])).toEqual([
      ["network-volume", "/svc-volume"],
      ["network-volume", "/runpod-volume"],
      ["tmp", "/tmp"],
    ]);
    expect(container.env!.find((e) => e.name === "RUNPOD_AI_API_KEY")?.valueFrom?.secretKeyRef).toEqual({ name: pod.metadata!.name, key: "RUNPOD_AI_API_KEY" });
    expect(container.env!.filter((e) => e.name.startsWith("SVC_"))).toEqual([]);
    expect(workerSecret(provider, "srv1").stringData).toEqual({ RUNPOD_AI_API_KEY: "svcw_token" });
    const shm = workerPod({ ...provider, shmSizeMb: 2048 }, plan);
    expect(shm.spec!.volumes).toContainEqual({ name: "shm", emptyDir: { medium: "Memory", sizeLimit: "2048Mi" } });
    // svc's own runtime still needs its artifact's URL.
    expect(() => workerPod(launch({ artifactUrl: undefined }), plan)).toThrow(/no URL a Pod could fetch/);
  });

  it("sizes the Pod by the endpoint's CPU instance, asks for its GPUs, and selects nodes of its volume's data center", () => {
    const cpuPod = workerPod(launch({ placement: { cpus: 1, memoryMb: 2048, gpus: 0, dataCenter: "eu-ro-1" } }), plan);
    expect(cpuPod.spec!.containers[0]!.resources).toEqual({ requests: { cpu: "1", memory: "2048Mi" }, limits: { cpu: "1", memory: "2048Mi" } });
    expect(cpuPod.spec!.nodeSelector).toEqual({ "svc.data-center": "eu-ro-1" });
    const gpuPod = workerPod(launch({ computeType: "GPU", gpuTypeIds: ["A100"], placement: { gpus: 1 } }), plan);
    expect(gpuPod.spec!.containers[0]!.resources!.limits).toEqual({ cpu: "2", memory: "4Gi", "nvidia.com/gpu": "1" });
    expect(gpuPod.spec!.nodeSelector).toBeUndefined();
    // gpuCount 2: two GPUs for the device plugin to give the container.
    const pair = workerPod(
      launch({ computeType: "GPU", gpuTypeIds: ["ADA_80_PRO"], placement: placementOf({ computeType: "GPU", instanceIds: [], gpuCount: 2 }) }),
      plan,
    );
    expect(pair.spec!.containers[0]!.resources!.limits).toEqual({ cpu: "2", memory: "4Gi", "nvidia.com/gpu": "2" });
  });

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
    expect(env).toMatchObject({
      USER_FLAG: "on",
      SVC_ARTIFACT: "http://svc.svc:8600/_worker/v1/artifacts/abc",
      SVC_API_URL: "http://svc.svc:8600",
      SVC_WORKER_REVISION: "rev-1",
    });
    expect(Object.values(env).some((v) => String(v).includes("/data/artifacts"))).toBe(false);
    // The token is the service's, not the user's variable of that name; it is in the worker's Secret.
    expect(workerSecret(launch(), "srv1").stringData).toEqual({ SVC_WORKER_TOKEN: "svcw_token", SVC_API_KEY: "svc_key" });
    expect(pod.spec!.affinity).toBeUndefined();
    expect(pod.spec!.volumes!.map((v) => v.name)).toEqual(["tmp"]);
  });

  it("confines the worker: non-root, read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp, a bounded memory /tmp", () => {
    const pod = workerPod(launch(), { ...plan, tmpMb: 256 });
    const [container] = pod.spec!.containers;
    expect(container!.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.spec!.volumes).toEqual([{ name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "256Mi" } }]);
    expect(container!.volumeMounts).toEqual([{ name: "tmp", mountPath: "/tmp" }]);
    expect(container!.env).toContainEqual({ name: "HOME", value: "/tmp" });
    // CPU and memory limited as requested (the instance's); the default /tmp size.
    expect(container!.resources!.limits).toEqual({ cpu: "2", memory: "4Gi" });
    expect(workerPod(launch(), plan).spec!.volumes).toEqual([{ name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "1024Mi" } }]);
    // The cluster's default runtime unless the operator names a RuntimeClass (gVisor's).
    expect(pod.spec!.runtimeClassName).toBeUndefined();
    expect(workerPod(launch(), { ...plan, runtimeClassName: "gvisor" }).spec!.runtimeClassName).toBe("gvisor");
    // A prebuilt image keeps its own user, and the writable root its template allows; escalation, capabilities and
    // seccomp as for any worker.
    const prebuilt = workerPod(launch({ image: "nginx:1", loadBalanced: true, containerDiskInGb: 10 }), plan).spec!.containers[0]!;
    expect(prebuilt.securityContext).toEqual({
      readOnlyRootFilesystem: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(prebuilt.env!.some((e) => e.name === "HOME")).toBe(false);
    // The kubelet bounds that root; an image allowed none gets a read-only one, and no bound.
    expect(prebuilt.resources!.limits!["ephemeral-storage"]).toBe("10Gi");
    const sealed = workerPod(launch({ image: "nginx:1", containerDiskInGb: 0 }), plan).spec!.containers[0]!;
    expect(sealed.securityContext!.readOnlyRootFilesystem).toBe(true);
    expect(sealed.resources!.limits!["ephemeral-storage"]).toBeUndefined();
  });

  it("a GPU worker of one GPU type: one nvidia.com/gpu, only on nodes of that type", () => {
    const pod = workerPod(launch({ computeType: "GPU", gpuTypeIds: ["A100"] }), plan);
    expect(pod.spec!.containers[0]!.resources!.limits).toEqual({ cpu: "2", memory: "4Gi", "nvidia.com/gpu": "1" });
    expect(pod.spec!.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["A100"] }] }],
        },
      },
    });
  });

  it("a GPU worker of several GPU types: on nodes of any of them, the earlier ones preferred (priority order)", () => {
    const pod = workerPod(launch({ computeType: "GPU", gpuTypeIds: ["H100", "A100", "L4"] }), plan);
    expect(pod.spec!.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["H100", "A100", "L4"] }] }],
        },
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, preference: { matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["H100"] }] } },
          { weight: 67, preference: { matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["A100"] }] } },
          { weight: 34, preference: { matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["L4"] }] } },
        ],
      },
    });
    // Weights stay within Kubernetes' 1..100 however many types there are.
    const many = workerPod(launch({ computeType: "GPU", gpuTypeIds: Array.from({ length: 150 }, (_, i) => `T${i}`) }), plan);
    const weights = many.spec!.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution!.map((p) => p.weight);
    expect(Math.max(...weights)).toBe(100);
    expect(Math.min(...weights)).toBe(1);
  });

  it("a GPU worker of any GPU: the device plugin's resource alone; ANY beside named types prefers them, requires none", () => {
    expect(workerPod(launch({ computeType: "GPU", gpuTypeIds: ["ANY"] }), plan).spec!.affinity).toBeUndefined();
    expect(workerPod(launch({ computeType: "GPU", gpuTypeIds: ["A100", "ANY"] }), plan).spec!.affinity).toEqual({
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, preference: { matchExpressions: [{ key: "svc.gpu-type", operator: "In", values: ["A100"] }] } },
        ],
      },
    });
    // A CPU endpoint's leftover GPU types do not place it.
    expect(workerPod(launch({ computeType: "CPU", gpuTypeIds: ["A100"] }), plan).spec!.affinity).toBeUndefined();
  });

  it("a load-balanced worker: its HTTP server on every interface of the Pod, at the port the Pod declares", () => {
    const container = workerPod(launch({ loadBalanced: true }), plan).spec!.containers[0]!;
    expect(container.ports).toEqual([{ name: "http", containerPort: 8080 }]);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: "SVC_HTTP_HOST", value: "0.0.0.0" },
        { name: "SVC_HTTP_PORT", value: "8080" },
      ]),
    );
    expect(workerPod(launch(), plan).spec!.containers[0]!.ports).toBeUndefined();
  });

  // The whole manifests, as Kubernetes gets them: a change to any field shows in review (update with `vitest -u`).
  it.each([
    ["CPU", {}],
    ["GPU, one type", { computeType: "GPU", gpuTypeIds: ["A100"] }],
    ["GPU, several types", { computeType: "GPU", gpuTypeIds: ["H100", "A100"] }],
    ["GPU, any", { computeType: "GPU", gpuTypeIds: ["ANY"] }],
    ["load-balanced, with a volume", { loadBalanced: true, volumeName: "models" }],
  ] as Array<[string, Partial<WorkerLaunch>]>)("manifest snapshot: %s", (_, extra) => {
    expect(workerPod(launch(extra), plan)).toMatchSnapshot();
  });

  it("keeps the credentials and the user's secret values off the Pod: its variables reference the worker's Secret", () => {
    const secretLaunch = launch({ environment: { USER_FLAG: "on", DB_PASSWORD: "hunter2" }, secretNames: ["DB_PASSWORD"] });
    const pod = workerPod(secretLaunch, plan);
    const text = JSON.stringify(pod);
    for (const value of ["svcw_token", "svc_key", "hunter2"]) expect(text).not.toContain(value);
    const env = pod.spec!.containers[0]!.env!;
    expect(env).toContainEqual({ name: "USER_FLAG", value: "on" });
    for (const key of ["SVC_WORKER_TOKEN", "SVC_API_KEY", "DB_PASSWORD"])
      expect(env).toContainEqual({ name: key, valueFrom: { secretKeyRef: { name: "svc-text-embedder-w1abc", key } } });
    expect(workerSecret(secretLaunch, "srv1")).toMatchSnapshot();
    // No API key (a prebuilt image's worker gets none): no key for it.
    expect(Object.keys(workerSecret(launch({ apiKey: undefined }), "srv1").stringData!)).toEqual(["SVC_WORKER_TOKEN"]);
  });

  it("a network volume: its claim mounted at the volume path", () => {
    const pod = workerPod(launch({ volumeName: "models" }), plan);
    expect(pod.spec!.volumes![0]).toEqual({ name: "network-volume", persistentVolumeClaim: { claimName: "svc-vol-models" } });
    expect(pod.spec!.containers[0]!.volumeMounts![0]).toEqual({ name: "network-volume", mountPath: "/svc-volume" });
    expect(pod.spec!.containers[0]!.env).toContainEqual({ name: "SVC_VOLUME_PATH", value: "/svc-volume" });
    // A service's volume (its id and size, beside its host directory): the claim of its id.
    const own = workerPod(launch({ volume: { id: "vol0123456789ab", sizeGb: 10 }, volumePath: "/data/volumes/vol0123456789ab" }), plan);
    expect(own.spec!.volumes![0]).toEqual({ name: "network-volume", persistentVolumeClaim: { claimName: "svc-vol-vol0123456789ab" } });
    expect(own.spec!.containers[0]!.env).toContainEqual({ name: "SVC_VOLUME_PATH", value: "/svc-volume" });
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

describe("exitOfPod", () => {
  const pod = (status: V1Pod["status"]): V1Pod => ({ status });
  const pulled = { image: "reg.example:5000/team/worker:1", credentials: { name: "team", username: "u", password: "p" } };

  it("an ended Pod's exit code; a running or pending one has not ended", () => {
    expect(exitOfPod(pod({ phase: "Failed", containerStatuses: [{ state: { terminated: { exitCode: 137 } } } as never] }))).toEqual({
      code: 137,
      signal: null,
    });
    expect(exitOfPod(pod({ phase: "Succeeded" }))).toEqual({ code: 0, signal: null });
    expect(exitOfPod(pod({ phase: "Running" }), pulled)).toBeUndefined();
    expect(exitOfPod(pod({ phase: "Pending", containerStatuses: [{ state: { waiting: { reason: "ContainerCreating" } } } as never] }), pulled)).toBeUndefined();
  });

  it("a worker image's container waiting on a failed pull ends the worker, saying which image, why, and with which credentials", () => {
    const waiting = (reason: string, message?: string) => pod({ phase: "Pending", containerStatuses: [{ state: { waiting: { reason, message } } } as never] });
    expect(exitOfPod(waiting("ErrImagePull", 'failed to pull and unpack image "reg.example:5000/team/worker:1": 401 Unauthorized'), pulled)).toEqual({
      code: null,
      signal: null,
      pullFailure: `pulling "reg.example:5000/team/worker:1" failed: unauthorized (registry auth "team")`,
    });
    expect(exitOfPod(waiting("ImagePullBackOff", "Back-off pulling image"), { image: "team/worker:1" })?.pullFailure).toBe(
      `pulling "team/worker:1" failed: Back-off pulling image (no registry auth)`,
    );
    // svc's own image (no launch image): the kubelet's wait is its own affair.
    expect(exitOfPod(waiting("ErrImagePull", "401 Unauthorized"))).toBeUndefined();
  });
});

describe("a node's model cache", () => {
  const models = { path: "/var/lib/svc-models", image: "reg:5000/svc-server:0.1.0" };
  const named = launch({ models: ["acme/tiny@main", "acme/other@v1"], modelHub: { url: "http://hub.internal", token: "hf_secret" } });

  it("an endpoint naming models: the node's directory as a hostPath, an init container fetching them, the worker reading it read-only", () => {
    const pod = workerPod(named, { ...plan, models });
    expect(pod.spec!.volumes).toContainEqual({ name: "svc-models", hostPath: { path: "/var/lib/svc-models", type: "DirectoryOrCreate" } });
    expect(pod.spec!.initContainers).toEqual([
      {
        name: "svc-models",
        image: "reg:5000/svc-server:0.1.0",
        args: ["models", "fetch", "--cache", "/svc-models", "--hub", "http://hub.internal", "acme/tiny@main", "acme/other@v1"],
        env: [{ name: "SVC_MODEL_HUB_TOKEN", valueFrom: { secretKeyRef: { name: pod.metadata!.name, key: "svc-model-hub-token" } } }],
        volumeMounts: [{ name: "svc-models", mountPath: "/svc-models" }],
        terminationMessagePolicy: "FallbackToLogsOnError",
        securityContext: {
          runAsUser: 0,
          runAsGroup: 0,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        },
      },
    ]);
    const worker = pod.spec!.containers[0]!;
    expect(worker.volumeMounts).toContainEqual({ name: "svc-models", mountPath: "/svc-models", readOnly: true });
    const env = Object.fromEntries(worker.env!.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ HF_HOME: "/svc-models", HF_HUB_CACHE: "/svc-models/hub", HF_HUB_OFFLINE: "1" });
    // The token is in the worker's Secret, under a key no worker variable references, and nowhere on the Pod.
    expect(JSON.stringify(pod)).not.toContain("hf_secret");
    expect(worker.env!.some((e) => e.valueFrom?.secretKeyRef?.key === "svc-model-hub-token")).toBe(false);
    expect(workerSecret(named, "srv1").stringData).toMatchObject({ "svc-model-hub-token": "hf_secret" });
  });

  it("no models, or no node cache set: the Pod as before", () => {
    for (const pod of [workerPod(launch(), { ...plan, models }), workerPod(named, plan)]) {
      expect(pod.spec!.initContainers).toBeUndefined();
      expect(pod.spec!.volumes!.map((v) => v.name)).not.toContain("svc-models");
      expect(pod.spec!.containers[0]!.env!.map((e) => e.name)).not.toContain("HF_HOME");
    }
    // Without a token the fetcher gets no variable for it; without a hub it uses its own default.
    const open = workerPod(launch({ models: ["acme/tiny@main"] }), { ...plan, models });
    expect(open.spec!.initContainers![0]!.env).toEqual([]);
    expect(open.spec!.initContainers![0]!.args).toEqual(["models", "fetch", "--cache", "/svc-models", "acme/tiny@main"]);
  });

  it("a failed fetch ends the worker as a start failure quoting the fetcher's error; a fetcher image that cannot be pulled too", () => {
    const failed: V1Pod = {
      spec: { nodeName: "gpu-3", containers: [] },
      status: {
        phase: "Failed",
        initContainerStatuses: [
          {
            name: "svc-models",
            image: "svc-server:0.1.0",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: {
              terminated: {
                exitCode: 1,
                reason: "Error",
                message:
                  "acme/missing@main: cannot be fetched\nerror: Model acme/missing@main cannot be fetched from http://hub: not_found: the hub has no revision acme/missing@main (404)\nCheck the model's name.\n",
              },
            },
          },
        ],
        containerStatuses: [{ name: "worker", image: "", imageID: "", ready: false, restartCount: 0, state: { waiting: { reason: "PodInitializing" } } }],
      },
    };
    expect(exitOfPod(failed)).toEqual({
      code: null,
      signal: null,
      startFailure:
        "the fetch of its models on node gpu-3 failed (exit code 1): Model acme/missing@main cannot be fetched from http://hub: not_found: the hub has no revision acme/missing@main (404)",
    });
    const pulling: V1Pod = {
      status: {
        phase: "Pending",
        initContainerStatuses: [
          {
            name: "svc-models",
            image: "svc-server:0.1.0",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: "ErrImagePull", message: "not found" } },
          },
        ],
      },
    };
    expect(exitOfPod(pulling)?.startFailure).toMatch(/^the model fetcher's image svc-server:0\.1\.0 cannot be pulled: .*SVC_MODELS_FETCH_IMAGE/);
    // Still fetching, or done: the worker's own state decides.
    const running: V1Pod = {
      status: {
        phase: "Pending",
        initContainerStatuses: [{ name: "svc-models", image: "", imageID: "", ready: false, restartCount: 0, state: { running: {} } }],
      },
    };
    expect(exitOfPod(running)).toBeUndefined();
  });
});
