import { describe, expect, it } from "vitest";
import { imageNotice, providerImageOf, snapshotNotice } from "./worker-kinds.js";

describe("snapshotNotice", () => {
  const endpoint = (snapshot?: boolean) => ({ name: "model", resource: { snapshot } }) as unknown as Parameters<typeof snapshotNotice>[1];
  it("says once that a driver cannot restore snapshots, and why, when the endpoint asks for them", () => {
    expect(snapshotNotice({ name: "docker" }, endpoint(true))).toBe(
      "endpoint model has snapshot: true, but the docker driver cannot restore snapshots (Docker restores a checkpoint only into the container it was taken from): its workers start without one, running their initialisation (docs/cold-start.md)",
    );
    expect(snapshotNotice({ name: "kubernetes" }, endpoint(true))).toMatch(/kubernetes driver cannot restore snapshots \(svc checkpoints only local processes/);
  });
  it("says nothing where snapshots are restored or not asked for", () => {
    expect(snapshotNotice({ name: "process", restoresSnapshots: true }, endpoint(true))).toBeUndefined();
    expect(snapshotNotice({ name: "docker" }, endpoint(false))).toBeUndefined();
    expect(snapshotNotice({ name: "swarm" }, endpoint(undefined))).toBeUndefined();
  });
});

describe("image endpoints of an app (Endpoint({ name, image }))", () => {
  const endpoint = (resource: Record<string, unknown>, type = "queue", artifactPath = "/a/artifact.tar.gz") =>
    ({ name: "llm", type, artifactPath, resource }) as unknown as Parameters<typeof providerImageOf>[0];
  const app = endpoint({ protocol: "provider", imageName: "my/worker:1.2" });

  it("run their image as a provider worker, as a REST endpoint of a worker image does", () => {
    expect(providerImageOf(app)).toBe("my/worker:1.2");
    expect(providerImageOf(endpoint({ imageName: "svc-worker-cpu:0.1.0" }))).toBeUndefined();
    expect(providerImageOf(endpoint({ imageName: "my/worker:1.2" }, "queue", ""))).toBe("my/worker:1.2");
  });

  it("wait, saying why and what to do, where the driver runs no images", () => {
    expect(imageNotice({ name: "process" }, app)).toBe(
      'endpoint llm runs the image "my/worker:1.2", and the process driver runs no images: its jobs wait in the queue. Run it where Docker runs workers (`svc server --workers docker`, `svc deploy --preview`, or `svc dev` with a Docker engine answering)',
    );
    expect(imageNotice({ name: "docker", hasImage: async () => true }, app)).toBeUndefined();
    expect(imageNotice({ name: "kubernetes", pullsImages: true }, app)).toBeUndefined();
    expect(imageNotice({ name: "swarm" }, app)).toMatch(/the swarm driver runs no images/);
    expect(imageNotice({ name: "process" }, endpoint({ imageName: "svc-worker-cpu:0.1.0" }))).toBeUndefined();
  });
});
