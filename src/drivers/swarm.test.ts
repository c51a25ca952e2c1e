import { describe, expect, it } from "vitest";
import { exitOfTask, swarmConfinementGaps, swarmServiceSpec } from "./swarm.js";
import type Docker from "dockerode";
import type { WorkerLaunch } from "./types.js";
import { placementOf } from "./placement.js";
import { jobOutcome, modelsJobSpec, nodesFor } from "./swarm-models.js";

type Template = { ContainerSpec: Docker.ContainerSpec; RestartPolicy?: unknown; Resources?: unknown; Placement?: unknown; Networks?: unknown };
const template = (spec: Docker.CreateServiceOptions) => spec.TaskTemplate as Template;

const launch = (extra: Partial<WorkerLaunch> = {}): WorkerLaunch => ({
  workerId: "w1abc",
  endpointId: "ep1",
  endpointName: "Ticker",
  app: "app",
  env: "prod",
  artifactPath: "/data/artifacts/abc.tar.gz",
  artifactUrl: "http://10.0.0.5:8600/_worker/v1/artifacts/abc",
  apiUrl: "http://10.0.0.5:8600",
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
const plan = { image: "svc-worker-cpu:0.1.0", session: "srv1", network: "host", stopGraceMs: 10_000 };

describe("swarmServiceSpec", () => {
  it("a provider worker image: no artifact needed, the provider's variables, the volume at /runpod-volume too, a /dev/shm tmpfs only where allowed", () => {
    const volume = { volume: { id: "vol0123456789ab", sizeGb: 20 }, config: { driver: "local", options: {} } };
    const provider = launch({ image: "acme/worker:1", protocol: "provider", artifactUrl: undefined, volume: volume.volume });
    const spec = swarmServiceSpec(provider, { ...plan, image: "acme/worker:1", volume });
    const container = template(spec).ContainerSpec!;
    expect(container.Image).toBe("acme/worker:1");
    expect(container.User).toBeUndefined();
    expect(container.Mounts!.map((m) => [m.Type, m.Target])).toEqual([
      ["volume", "/svc-volume"],
      ["volume", "/runpod-volume"],
      ["tmpfs", "/tmp"],
    ]);
    expect(container.Env).toEqual(expect.arrayContaining([`RUNPOD_POD_ID=${provider.workerId}`, `RUNPOD_AI_API_KEY=${provider.workerToken}`]));
    expect(container.Env!.filter((e) => e.startsWith("SVC_"))).toEqual([]);
    const shm = template(swarmServiceSpec({ ...provider, shmSizeMb: 512 }, { ...plan, image: "acme/worker:1" })).ContainerSpec!.Mounts!;
    expect(shm).toContainEqual({ Type: "tmpfs", Target: "/dev/shm", TmpfsOptions: { SizeBytes: 512 * 1024 * 1024 } });
  });

  it("one labelled replica without restart policy, the artifact by URL and the protocol variables winning", () => {
    const spec = swarmServiceSpec(launch(), plan);
    expect(spec.Mode).toEqual({ Replicated: { Replicas: 1 } });
    expect(template(spec).RestartPolicy).toEqual({ Condition: "none", MaxAttempts: 0 });
    expect(spec.Labels).toEqual({
      "svc.managed": "true",
      "svc.app": "app",
      "svc.env": "prod",
      "svc.endpoint": "ep1",
      "svc.session": "srv1",
      "svc.worker": "w1abc",
      "svc.revision": "rev-1",
    });
    const container = template(spec).ContainerSpec;
    expect(container.Labels).toEqual(spec.Labels);
    expect(container.Env).toEqual(
      expect.arrayContaining([
        "USER_FLAG=on",
        "SVC_WORKER_TOKEN=svcw_token",
        "SVC_ARTIFACT=http://10.0.0.5:8600/_worker/v1/artifacts/abc",
        "SVC_API_URL=http://10.0.0.5:8600",
        "SVC_WORKER_REVISION=rev-1",
      ]),
    );
    expect(container.Env!.some((e: string) => e.includes("/data/artifacts"))).toBe(false);
    expect(container.StopGracePeriod).toBe(10_000_000_000);
    expect(template(spec).Networks).toEqual([{ Target: "host" }]);
    expect(template(spec).Resources).toEqual({ Limits: { Pids: 1024 }, Reservations: {} });
  });

  it("confines the worker: non-root, read-only root, no capabilities, no-new-privileges, a bounded tmpfs /tmp, HOME there", () => {
    const spec = swarmServiceSpec(launch({ placement: { cpus: 1, memoryMb: 2048, gpus: 0 } }), { ...plan, limits: { pidsLimit: 200, tmpMb: 256 } });
    const container = template(spec).ContainerSpec as Docker.ContainerSpec & { Privileges?: { NoNewPrivileges?: boolean } };
    expect(container.User).toBe("1000:1000");
    expect(container.ReadOnly).toBe(true);
    expect(container.CapabilityDrop).toEqual(["ALL"]);
    expect(container.Privileges).toEqual({ NoNewPrivileges: true });
    expect(container.Mounts).toEqual([{ Type: "tmpfs", Target: "/tmp", TmpfsOptions: { SizeBytes: 256 * 1024 ** 2, Mode: 0o1777, Options: [["exec"]] } }]);
    expect(container.Env).toContain("HOME=/tmp");
    // The instance's vCPUs and memory, as limits as well as reservations, and the process limit.
    expect(template(spec).Resources).toEqual({
      Limits: { NanoCPUs: 1e9, MemoryBytes: 2 * 1024 ** 3, Pids: 200 },
      Reservations: { NanoCPUs: 1e9, MemoryBytes: 2 * 1024 ** 3 },
    });
    // A prebuilt image keeps its own user, and the writable layer its template allows; capabilities and privileges
    // stay dropped.
    const prebuilt = template(swarmServiceSpec(launch({ image: "nginx:1", containerDiskInGb: 10 }), plan)).ContainerSpec as Docker.ContainerSpec & {
      Privileges?: unknown;
    };
    expect(template(swarmServiceSpec(launch({ image: "nginx:1", containerDiskInGb: 0 }), plan)).ContainerSpec.ReadOnly).toBe(true);
    expect(prebuilt.User).toBeUndefined();
    expect(prebuilt.ReadOnly).toBe(false);
    expect(prebuilt.CapabilityDrop).toEqual(["ALL"]);
    expect(prebuilt.Privileges).toEqual({ NoNewPrivileges: true });
    expect(prebuilt.Env!.some((e: string) => e.startsWith("HOME="))).toBe(false);
  });

  it("says what of the confinement an older engine drops", () => {
    expect(swarmConfinementGaps("1.41")).toEqual([expect.stringMatching(/ignores no-new-privileges/), expect.stringMatching(/\/tmp noexec/)]);
    expect(swarmConfinementGaps("1.45")).toEqual([expect.stringMatching(/\/tmp noexec/)]);
    expect(swarmConfinementGaps("1.46")).toEqual([]);
  });

  it("reserves the vCPUs and memory of the endpoint's CPU instance and constrains workers to their volume's data center", () => {
    const spec = swarmServiceSpec(launch({ placement: { cpus: 2, memoryMb: 4096, gpus: 0, dataCenter: "eu-ro-1" } }), plan);
    expect(template(spec).Resources).toEqual({
      Limits: { NanoCPUs: 2_000_000_000, MemoryBytes: 4 * 1024 ** 3, Pids: 1024 },
      Reservations: { NanoCPUs: 2_000_000_000, MemoryBytes: 4 * 1024 ** 3 },
    });
    expect(template(spec).Placement).toEqual({ Constraints: ["node.labels.svc.data-center==eu-ro-1"] });
  });

  it("reserves a GPU as a generic resource, constrains one GPU type, and mounts the network volume", () => {
    const volume = {
      volume: { id: "vol0123456789ab", sizeGb: 20 },
      config: { driver: "local", options: { type: "nfs", o: "addr=10.0.0.5,rw", device: ":/exports/{volume}" } },
    };
    const spec = swarmServiceSpec(launch({ computeType: "GPU", gpuTypeIds: ["A100"], volume: volume.volume }), {
      ...plan,
      gpus: { kind: "NVIDIA-GPU", count: 1 },
      volume,
    });
    expect(template(spec).Resources).toEqual({
      Limits: { Pids: 1024 },
      Reservations: { GenericResources: [{ DiscreteResourceSpec: { Kind: "NVIDIA-GPU", Value: 1 } }] },
    });
    expect(
      template(
        swarmServiceSpec(launch({ computeType: "GPU", gpuTypeIds: ["A100", "H100"], placement: { gpus: 1, dataCenter: "us-1" } }), {
          ...plan,
          gpus: { kind: "NVIDIA-GPU", count: 1 },
        }),
      ).Placement,
    ).toEqual({
      Constraints: ["node.labels.svc.data-center==us-1"],
    });
    expect(template(spec).Placement).toEqual({ Constraints: ["node.labels.svc.gpu-type==A100"] });
    expect(template(spec).ContainerSpec.Mounts).toEqual([
      {
        Type: "volume",
        Source: "svc-vol-vol0123456789ab",
        Target: "/svc-volume",
        // Each node creates the volume with the operator's driver when the task lands there, the id in its options.
        VolumeOptions: {
          NoCopy: true,
          Labels: { "svc.managed": "true", "svc.session": "srv1", "svc.volume": "vol0123456789ab" },
          DriverConfig: { Name: "local", Options: { type: "nfs", o: "addr=10.0.0.5,rw", device: ":/exports/vol0123456789ab" } },
        },
      },
      { Type: "tmpfs", Target: "/tmp", TmpfsOptions: { SizeBytes: 1024 * 1024 ** 2, Mode: 0o1777, Options: [["exec"]] } },
    ]);
    // gpuCount 2: two GPUs of the generic resource (the driver counts them from the placement).
    const pair = placementOf({ computeType: "GPU", instanceIds: [], gpuCount: 2 });
    expect(
      template(
        swarmServiceSpec(launch({ computeType: "GPU", gpuTypeIds: ["A100"], placement: pair }), { ...plan, gpus: { kind: "NVIDIA-GPU", count: pair.gpus } }),
      ).Resources,
    ).toMatchObject({
      Reservations: { GenericResources: [{ DiscreteResourceSpec: { Kind: "NVIDIA-GPU", Value: 2 } }] },
    });
    expect(template(spec).ContainerSpec.Env).toContain("SVC_VOLUME_PATH=/svc-volume");
  });

  it("refuses a launch whose artifact no node could fetch", () => {
    expect(() => swarmServiceSpec(launch({ artifactUrl: undefined }), plan)).toThrow(/no URL a Swarm worker could fetch/);
  });
});

describe("exitOfTask", () => {
  it("reads an ended task's exit code; a running one has not ended", () => {
    expect(exitOfTask({ Status: { State: "failed", ContainerStatus: { ExitCode: 137 } } })).toEqual({ code: 137, signal: null });
    expect(exitOfTask({ Status: { State: "complete", ContainerStatus: { ExitCode: 0 } } })).toEqual({ code: 0, signal: null });
    expect(exitOfTask({ Status: { State: "shutdown" } })).toEqual({ code: null, signal: null });
    expect(exitOfTask({ Status: { State: "running" } })).toBeUndefined();
  });

  it("a worker image's task refused for want of its image is a failed pull naming the image and the credentials; other ends are not", () => {
    const pulled = { image: "reg.example:5000/team/worker:1", credentials: { name: "team", username: "u", password: "p" } };
    const refused = exitOfTask({ Status: { State: "rejected", Err: "No such image: reg.example:5000/team/worker:1" } }, pulled);
    expect(refused).toEqual({
      code: null,
      signal: null,
      pullFailure: `pulling "reg.example:5000/team/worker:1" failed: the node could not pull it (refused credentials, or no such image in the registry) (registry auth "team")`,
    });
    expect(exitOfTask({ Status: { State: "rejected", Err: "pull access denied for team/worker" } }, { image: "team/worker:1" })?.pullFailure).toBe(
      `pulling "team/worker:1" failed: unauthorized (no registry auth)`,
    );
    // Refused for another reason, or an image-less launch (svc's own image): an ordinary end.
    expect(exitOfTask({ Status: { State: "rejected", Err: "invalid mount config" } }, pulled)?.pullFailure).toBeUndefined();
    expect(exitOfTask({ Status: { State: "rejected", Err: "No such image: svc-worker-cpu" } })?.pullFailure).toBeUndefined();
    expect(exitOfTask({ Status: { State: "failed", Err: "task: non-zero exit (1)", ContainerStatus: { ExitCode: 1 } } }, pulled)?.pullFailure).toBeUndefined();
  });
});

describe("node model caches", () => {
  const cache = { path: "/var/lib/svc-models", image: "reg:5000/svc-server:0.1.0" };
  const named = launch({ models: ["acme/tiny@main"], modelHub: { url: "http://127.0.0.1:9000", token: "hf_token" } });

  it("the fetch job: a global job of the fetcher on the host network, the cache's parent bound, under the worker's constraints", () => {
    const spec = modelsJobSpec(named, { cache, session: "srv1", constraints: ["node.labels.svc.gpu-type==A100"], name: "svc-models-x" });
    expect(spec.Mode).toEqual({ GlobalJob: {} });
    expect(spec.Labels).toEqual({ "svc.managed": "true", "svc.session": "srv1", "svc.models-fetch": "true" });
    const t = template(spec);
    expect(t.ContainerSpec.Image).toBe("reg:5000/svc-server:0.1.0");
    expect(t.ContainerSpec.Args).toEqual(["models", "fetch", "--cache", "/svc-models-parent/svc-models", "--hub", "http://127.0.0.1:9000", "acme/tiny@main"]);
    expect(t.ContainerSpec.Env).toEqual(["SVC_MODEL_HUB_TOKEN=hf_token"]);
    expect(t.ContainerSpec.Mounts).toEqual([{ Type: "bind", Source: "/var/lib", Target: "/svc-models-parent" }]);
    expect(t.RestartPolicy).toEqual({ Condition: "none", MaxAttempts: 0 });
    expect(t.Placement).toEqual({ Constraints: ["node.labels.svc.gpu-type==A100"] });
    expect(t.Networks).toEqual([{ Target: "host" }]);
  });

  it("the worker: the node's cache bound read-only at /svc-models and the variables pointing at it; none without models or a cache", () => {
    const container = template(swarmServiceSpec(named, { ...plan, models: cache })).ContainerSpec;
    expect(container.Mounts).toContainEqual({ Type: "bind", Source: "/var/lib/svc-models", Target: "/svc-models", ReadOnly: true });
    expect(container.Env).toEqual(expect.arrayContaining(["HF_HOME=/svc-models", "HF_HUB_CACHE=/svc-models/hub", "HF_HUB_OFFLINE=1"]));
    expect(container.Env!.join("\n")).not.toContain("hf_token");
    for (const spec of [swarmServiceSpec(launch(), { ...plan, models: cache }), swarmServiceSpec(named, plan)]) {
      expect(template(spec).ContainerSpec.Mounts!.map((m) => m.Target)).not.toContain("/svc-models");
      expect(template(spec).ContainerSpec.Env!.some((e) => e.startsWith("HF_HOME="))).toBe(false);
    }
  });

  it("the nodes a job covers, and when it is done or failed", () => {
    const node = (ID: string, labels: Record<string, string> = {}, state = "ready") => ({
      ID,
      Spec: { Availability: "active", Labels: labels },
      Status: { State: state },
    });
    const nodes = [node("a", { "svc.gpu-type": "A100" }), node("b"), node("c", { "svc.gpu-type": "A100" }, "down")];
    expect(nodesFor(nodes, [])).toEqual(["a", "b"]);
    expect(nodesFor(nodes, ["node.labels.svc.gpu-type==A100"])).toEqual(["a"]);
    const task = (NodeID: string, State: string) => ({ NodeID, Status: { State } });
    expect(jobOutcome([], ["a"])).toEqual({ state: "running" });
    expect(jobOutcome([task("a", "running"), task("b", "complete")], ["a", "b"])).toEqual({ state: "running" });
    expect(jobOutcome([task("a", "complete")], ["a", "b"])).toEqual({ state: "running" });
    expect(jobOutcome([task("a", "complete"), task("b", "complete")], ["a", "b"])).toEqual({ state: "done", nodes: ["a", "b"] });
    expect(jobOutcome([task("a", "complete"), task("b", "failed")], ["a", "b"])).toMatchObject({ state: "failed", task: { NodeID: "b" } });
  });
});
