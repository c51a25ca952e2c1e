import { describe, expect, it } from "vitest";
import { needsRestart, planEndpointRow, planEndpointSpec } from "./endpoint-plan.js";
import type { RestEndpointSpec, TemplateRecord } from "./store.js";

const template: TemplateRecord = { id: "tpl1", userId: "u", name: "t", imageName: "svc://abc", env: { T: "1" }, containerDiskInGb: 10, createdAt: 0 };
const lookup = { template: (id: string) => (id === "tpl1" ? template : undefined), volume: () => undefined };
const noImages = { runsImages: false, present: () => false };
const spec = (over: Partial<RestEndpointSpec> = {}): RestEndpointSpec => planEndpointSpec({ name: "e", templateId: "tpl1", ...over }, undefined, lookup).spec!;

describe("REST endpoint planning", () => {
  it("restarts workers exactly when GPU types, GPU count, worker counts, template or volume change", () => {
    const base = spec({ gpuTypeIds: ["ADA_24"] });
    expect(needsRestart(base, { ...base, name: "renamed", env: { X: "y" }, idleTimeout: 99, executionTimeoutMs: 5000, scalerValue: 9 })).toBe(false);
    for (const change of [
      { gpuTypeIds: ["AMPERE_48", "ADA_24"] },
      { gpuCount: 2 },
      { workersMin: 1 },
      { workersMax: 9 },
      { templateId: "tpl2" },
      { networkVolumeId: "v" },
    ]) {
      expect(needsRestart(base, { ...base, ...change })).toBe(true);
    }
  });

  it("allocates the first GPU type the host has, in priority order, or waits with the reason", () => {
    const code = {
      id: "abc",
      name: "reader",
      userId: "u",
      app: "a",
      env: "e",
      artifactPath: "/x.tar.gz",
      resource: { handler: "endpoints/reader/handler.mjs", functions: [], env: {}, maxConcurrency: 2, retries: 1 },
    } as never;
    const plan = (gpuTypeIds: string[], host: string[]) =>
      planEndpointRow({
        id: "e1",
        userId: "u",
        spec: spec({ gpuTypeIds }),
        template,
        code,
        hostGpuTypes: host,
        images: noImages,
        before: undefined,
        generation: 0,
        now: 1,
      });
    const ok = plan(["ADA_80_PRO", "ADA_24", "AMPERE_48"], ["AMPERE_48", "ADA_24"]);
    expect(ok).toMatchObject({ status: "READY", allocatedGpuType: "ADA_24", statusReason: null });
    expect(ok.row).toMatchObject({ name: "reader", app: "", env: "", artifactPath: "/x.tar.gz" });
    // Every type of the list the host has, in priority order: each worker gets the first with a free GPU.
    expect(ok.row.resource).toMatchObject({ workersMax: 3, gpuTypeIds: ["ADA_24", "AMPERE_48"], gpuCount: 1, env: { T: "1" }, maxConcurrency: 2 });
    const waiting = plan(["ADA_80_PRO"], ["AMPERE_48"]);
    expect(waiting).toMatchObject({ status: "WAITING", allocatedGpuType: null });
    expect(waiting.statusReason).toBe("none of the GPU types ADA_80_PRO is available on this host (it has: AMPERE_48)");
    expect(waiting.row.resource.workersMax).toBe(0);
    expect(plan(["ADA_80_PRO"], ["ADA_80_PRO"]).row.revision).not.toBe(plan(["ADA_80_PRO", "AMPERE_48"], ["AMPERE_48"]).row.revision);
  });

  it("the endpoint's workers scale by the policy it shows: the given scalerType and scalerValue, else the provider's default QUEUE_DELAY 4 s", () => {
    const code = {
      id: "abc",
      name: "reader",
      userId: "u",
      app: "a",
      env: "e",
      artifactPath: "/x.tar.gz",
      resource: { handler: "h.mjs", functions: [], env: {}, maxConcurrency: 1, retries: 1 },
    } as never;
    const row = (over: Partial<RestEndpointSpec>) =>
      planEndpointRow({ id: "e1", userId: "u", spec: spec(over), template, code, hostGpuTypes: [], images: noImages, before: undefined, generation: 0, now: 1 })
        .row;
    expect(row({}).resource.scaler).toEqual({ type: "QUEUE_DELAY", value: 4 });
    expect(row({ scalerType: "REQUEST_COUNT", scalerValue: 3 }).resource.scaler).toEqual({ type: "REQUEST_COUNT", value: 3 });
    // A new policy applies to the running workers: it is no new revision.
    expect(row({ scalerType: "REQUEST_COUNT", scalerValue: 3 }).revision).toBe(row({}).revision);
  });

  it("more GPUs per worker than the host has: waiting, with what it has", () => {
    const code = {
      id: "abc",
      name: "reader",
      userId: "u",
      app: "a",
      env: "e",
      artifactPath: "/x.tar.gz",
      resource: { handler: "h.mjs", functions: [], env: {}, maxConcurrency: 1, retries: 1 },
    } as never;
    const gpuCapacity = (request: { typeIds: readonly string[]; count: number }) =>
      request.count <= 1 ? { satisfiable: true, reason: "" } : { satisfiable: false, reason: `${request.typeIds[0]}: 1 on this host, ${request.count} needed` };
    const pair = planEndpointRow({
      id: "e1",
      userId: "u",
      spec: spec({ gpuTypeIds: ["HOPPER_141"], gpuCount: 2 }),
      template,
      code,
      hostGpuTypes: ["HOPPER_141"],
      gpuCapacity,
      images: noImages,
      before: undefined,
      generation: 0,
      now: 1,
    });
    expect(pair).toMatchObject({
      status: "WAITING",
      allocatedGpuType: null,
      statusReason: "this host has too few GPUs for gpuCount 2 (HOPPER_141: 1 on this host, 2 needed)",
    });
    expect(pair.row.resource.workersMax).toBe(0);
  });

  it("a prebuilt image runs as a load-balanced endpoint only with a driver that runs images, the image present and /ping served", () => {
    const image: TemplateRecord = { ...template, id: "tpl2", imageName: "acme/api:1" };
    const lb = { ...spec(), templateId: "tpl2", type: "lb" as const };
    const plan = (images: { runsImages: boolean; present: (name: string) => boolean }, pingFailed?: { ok: false; state: "missing"; message: string }) =>
      planEndpointRow({
        id: "e2",
        userId: "u",
        spec: lb,
        template: image,
        code: undefined,
        hostGpuTypes: [],
        images,
        pingFailed,
        before: undefined,
        generation: 0,
        now: 1,
      });
    const ready = plan({ runsImages: true, present: (name) => name === "acme/api:1" });
    expect(ready).toMatchObject({ status: "READY", statusReason: null });
    expect(ready.row).toMatchObject({ type: "lb", name: "e", artifactPath: "", resource: { is_load_balanced: true, imageName: "acme/api:1", workersMax: 3 } });
    expect(plan(noImages).statusReason).toContain("only the Docker driver runs (start the service with `svc server --workers docker`)");
    expect(plan({ runsImages: true, present: () => false }).statusReason).toContain('image "acme/api:1" is not in the Docker engine; there is no registry');
    const blind = plan({ runsImages: true, present: () => true }, { ok: false, state: "missing", message: "it has no /ping path" });
    expect(blind).toMatchObject({ status: "WAITING", statusReason: "it has no /ping path" });
    expect(blind.row.resource.workersMax).toBe(0);
  });

  it("an image as a queue endpoint is a provider worker: READY on a driver that runs images and holds it, else WAITING saying why", () => {
    const image: TemplateRecord = { ...template, id: "tpl2", imageName: "acme/worker:1" };
    const plan = (images: { runsImages: boolean; driver?: string; present: (name: string) => boolean }) =>
      planEndpointRow({
        id: "e3",
        userId: "u",
        spec: { ...spec(), templateId: "tpl2" },
        template: image,
        code: undefined,
        hostGpuTypes: [],
        images,
        before: undefined,
        generation: 0,
        now: 1,
      });
    const ready = plan({ runsImages: true, driver: "docker", present: (name) => name === "acme/worker:1" });
    expect(ready).toMatchObject({ status: "READY", statusReason: null });
    expect(ready.row).toMatchObject({ type: "queue", artifactPath: "", resource: { is_load_balanced: false, imageName: "acme/worker:1", workersMax: 3 } });
    const onProcess = plan({ runsImages: false, driver: "process", present: () => false });
    expect(onProcess.status).toBe("WAITING");
    expect(onProcess.statusReason).toContain(
      'image "acme/worker:1" is a worker image, and the process driver runs no images: only the Docker, Swarm and Kubernetes drivers run them',
    );
    expect(onProcess.row.resource.workersMax).toBe(0);
    expect(plan({ runsImages: true, driver: "docker", present: () => false }).statusReason).toContain('image "acme/worker:1" is not in the Docker engine');
  });

  it("refuses a load-balanced endpoint over a svc:// template (422 errors)", () => {
    expect(planEndpointSpec({ name: "e", templateId: "tpl1", type: "lb" }, undefined, lookup).errors).toEqual([
      "$.type: a load-balanced endpoint runs a prebuilt image; template tpl1 runs svc code (svc://abc), which `svc deploy` serves",
    ]);
  });
});
