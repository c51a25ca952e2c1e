import { describe, expect, it } from "vitest";
import {
  claimBelow,
  clusterVolumeName,
  clusterVolumeRefusal,
  dataCenterRefusal,
  expandVolumeOptions,
  parseVolumeDriverOptions,
  swarmVolumeConfigOf,
  swarmVolumeMount,
  volumeClaim,
} from "./cluster-volumes.js";
import { clusterNodesOf } from "./swarm.js";

const volume = { id: "vol0123456789ab", sizeGb: 50 };

describe("driver options", () => {
  it("reads docker's key=value list, a bare piece continuing the value before it, quoted values whole", () => {
    expect(parseVolumeDriverOptions("type=nfs,o=addr=10.0.0.5,rw,device=:/exports/{volume}")).toEqual({
      options: { type: "nfs", o: "addr=10.0.0.5,rw", device: ":/exports/{volume}" },
    });
    expect(parseVolumeDriverOptions('type=nfs,"o=addr=10.0.0.5,nfsvers=4,rw",device=:/exports/{volume}')).toEqual({
      options: { type: "nfs", o: "addr=10.0.0.5,nfsvers=4,rw", device: ":/exports/{volume}" },
    });
    expect(parseVolumeDriverOptions("type=none,o=bind,device=/srv/svc/volumes/{volume}")).toEqual({
      options: { type: "none", o: "bind", device: "/srv/svc/volumes/{volume}" },
    });
  });

  it("refuses what is no option list, and placeholders it does not know", () => {
    expect(parseVolumeDriverOptions("rw,type=nfs").problem).toMatch(/starts with "rw"/);
    expect(parseVolumeDriverOptions('o="addr').problem).toMatch(/unclosed double quote/);
    expect(parseVolumeDriverOptions(" , ").problem).toMatch(/names no option/);
    expect(parseVolumeDriverOptions("device=/exports/{id}").problem).toMatch(/\{id\}.*\{volume\}.*\{size\}/);
  });

  it("expands {volume} to the volume's id and {size} to its GB in every option", () => {
    expect(expandVolumeOptions({ device: ":/exports/{volume}", size: "{size}G", o: "addr=x" }, volume)).toEqual({
      device: ":/exports/vol0123456789ab",
      size: "50G",
      o: "addr=x",
    });
  });

  it("turns volumes on for Swarm with a driver, options, or both (local by default)", () => {
    expect(swarmVolumeConfigOf(undefined, undefined)).toBeUndefined();
    expect(swarmVolumeConfigOf(undefined, { o: "bind" })).toEqual({ driver: "local", options: { o: "bind" } });
    expect(swarmVolumeConfigOf("rexray/efs", undefined)).toEqual({ driver: "rexray/efs", options: {} });
  });
});

describe("refusals", () => {
  it("refuses a worker with a volume when the operator named no storage, naming the setting to set", () => {
    const launch = { endpointName: "e", volumePath: "/data/volumes/vol0123456789ab", volume };
    expect(clusterVolumeRefusal(launch, "Kubernetes", false)).toMatch(/Endpoint e mounts a network volume.*set SVC_K8S_STORAGE_CLASS/);
    expect(clusterVolumeRefusal(launch, "Docker Swarm", false)).toMatch(/set SVC_SWARM_VOLUME_DRIVER and SVC_SWARM_VOLUME_OPTIONS/);
    expect(clusterVolumeRefusal(launch, "Kubernetes", true)).toBeUndefined();
    expect(clusterVolumeRefusal({ endpointName: "e" }, "Kubernetes", false)).toBeUndefined();
    expect(clusterVolumeRefusal({ endpointName: "e", volumePath: "/data/volumes/x" }, "Docker Swarm", true)).toMatch(/could not name/);
  });

  it("refuses a worker whose volume's data center has no node that takes work", () => {
    const nodes = clusterNodesOf([
      { Spec: { Availability: "active", Labels: { "svc.data-center": "eu-1" } }, Status: { State: "ready" } },
      { Spec: { Availability: "drain", Labels: { "svc.data-center": "us-1" } }, Status: { State: "ready" } },
      { Spec: { Availability: "active", Labels: { "svc.data-center": "ap-1" } }, Status: { State: "down" } },
    ]);
    expect(dataCenterRefusal("e", "eu-1", nodes, "Docker Swarm")).toBeUndefined();
    expect(dataCenterRefusal("e", undefined, nodes, "Docker Swarm")).toBeUndefined();
    expect(dataCenterRefusal("e", "us-1", nodes, "Docker Swarm")).toMatch(/data center us-1.*docker node update --label-add svc.data-center=us-1/);
    expect(dataCenterRefusal("e", "ap-1", nodes, "Docker Swarm")).toMatch(/never be placed/);
    expect(dataCenterRefusal("e", "eu-1", [], "Kubernetes")).toMatch(/kubectl label node <node> svc.data-center=eu-1/);
  });
});

describe("what each node mounts", () => {
  it("Swarm: a Docker volume svc-vol-<id> of the operator's driver, its options expanded for the volume", () => {
    const mount = swarmVolumeMount(
      volume,
      { driver: "local", options: { type: "none", o: "bind", device: "/srv/svc/volumes/{volume}" } },
      { "svc.volume": volume.id },
    );
    expect(mount).toEqual({
      Type: "volume",
      Source: "svc-vol-vol0123456789ab",
      Target: "/svc-volume",
      VolumeOptions: {
        NoCopy: true,
        Labels: { "svc.volume": volume.id },
        DriverConfig: { Name: "local", Options: { type: "none", o: "bind", device: "/srv/svc/volumes/vol0123456789ab" } },
      },
    });
  });

  it("Kubernetes: a ReadWriteMany claim svc-vol-<id> of the StorageClass, asking for the volume's size", () => {
    expect(volumeClaim(volume, { storageClass: "nfs-rwx" }, { "svc.managed": "true" })).toEqual({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "svc-vol-vol0123456789ab", labels: { "svc.managed": "true" } },
      spec: { accessModes: ["ReadWriteMany"], storageClassName: "nfs-rwx", resources: { requests: { storage: "50Gi" } } },
    });
    expect(clusterVolumeName("VOL_x")).toBe("svc-vol-vol-x");
  });

  it("a claim is grown only when it asks for less than the volume's size", () => {
    expect(claimBelow("10Gi", 20)).toBe(true);
    expect(claimBelow("20Gi", 20)).toBe(false);
    expect(claimBelow("30G", 20)).toBe(false);
    expect(claimBelow("20G", 20)).toBe(true);
    expect(claimBelow(undefined, 1)).toBe(true);
    expect(claimBelow("1Ti", 20)).toBe(false);
  });
});
