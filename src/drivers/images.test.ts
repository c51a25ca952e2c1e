import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { UserError } from "../errors.js";
import { collectImageInputs, parseLdd, productionPackages, runtimeClosure, type ImageInputs } from "./image-inputs.js";
import { importChanges, planImageAction, planServerImage, planWorkerImage } from "./image-plan.js";
import { planPrune, supersededImages, type WorkerImageInfo } from "./images.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

const LDD = `	linux-vdso.so.1 (0x00007ffd)
	libdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f3a57286000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3a56d3e000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f3a5729e000)
`;

function inputs(over: Partial<ImageInputs> = {}): ImageInputs {
  const file = (path: string, text: string) => ({ path, mode: 0o644, size: text.length, sha256: `sha-${text}`, content: Buffer.from(text) });
  return {
    system: [{ ...file("/usr/local/bin/node", "node-binary"), mode: 0o755 }, file("/lib/x86_64-linux-gnu/libc.so.6", "libc")],
    runtime: [file("/opt/svc/dist/runtime/worker.js", "worker"), file("/opt/svc/node_modules/tar-stream/index.js", "tar")],
    hasCaBundle: false,
    ...over,
  };
}

describe("parseLdd", () => {
  it("lists the libraries and the loader, skipping the vDSO", () => {
    expect(parseLdd(LDD)).toEqual(["/lib/x86_64-linux-gnu/libdl.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]);
  });
  it("returns nothing for a static binary and refuses missing libraries", () => {
    expect(parseLdd("\tstatically linked\n")).toEqual([]);
    expect(() => parseLdd("\tlibfoo.so.1 => not found\n")).toThrow(UserError);
  });
});

describe("planWorkerImage", () => {
  it("is deterministic and names every input in its hash", () => {
    const a = planWorkerImage("cpu", inputs(), "1.2.3");
    expect(planWorkerImage("cpu", inputs(), "1.2.3").hash).toBe(a.hash);
    expect(a.versionTag).toBe("svc-worker-cpu:1.2.3");
    expect(a.hashTag).toBe(`svc-worker-cpu:${a.hash.slice(0, 20)}`);
    const changedRuntime = inputs();
    changedRuntime.runtime[0] = { ...changedRuntime.runtime[0]!, sha256: "sha-other" };
    expect(planWorkerImage("cpu", changedRuntime, "1.2.3").hash).not.toBe(a.hash);
    expect(planWorkerImage("cpu", inputs(), "1.2.4").hash).not.toBe(a.hash);
    expect(planWorkerImage("gpu", inputs(), "1.2.3").hash).not.toBe(a.hash);
  });

  it("lays out a non-root user, writable /tmp and volume mount, parents before children", () => {
    const plan = planWorkerImage("cpu", inputs(), "1.2.3");
    const byPath = new Map(plan.entries.map((e) => [e.path, e]));
    expect(byPath.get("/tmp")).toMatchObject({ type: "directory", mode: 0o1777 });
    expect(byPath.get("/svc-volume")).toMatchObject({ type: "directory", uid: 1000, gid: 1000 });
    expect(byPath.get("/home/svc")).toMatchObject({ uid: 1000 });
    expect(byPath.get("/usr/local")).toMatchObject({ type: "directory" });
    expect(byPath.get("/etc/passwd")?.file?.content?.toString()).toContain("svc:x:1000:1000");
    expect(JSON.parse(byPath.get("/opt/svc/package.json")!.file!.content!.toString())).toMatchObject({ version: "1.2.3", type: "module" });
    const paths = plan.entries.map((e) => e.path);
    for (const [i, path] of paths.entries()) {
      const parent = path.slice(0, path.lastIndexOf("/"));
      if (parent) expect(paths.indexOf(parent)).toBeLessThan(i);
    }
    expect(plan.config).toMatchObject({ user: "1000:1000", cmd: ["/usr/local/bin/node", "/opt/svc/dist/runtime/worker.js"] });
    expect(plan.config.labels).toMatchObject({ "svc.managed": "true", "svc.image.kind": "cpu", "svc.image.hash": plan.hash });
  });

  it("gives the GPU image the NVIDIA driver capabilities, never every GPU, and the CPU image none", () => {
    expect(planWorkerImage("gpu", inputs(), "1").config.env).toMatchObject({ NVIDIA_DRIVER_CAPABILITIES: "compute,utility" });
    expect(planWorkerImage("gpu", inputs(), "1").config.env.NVIDIA_VISIBLE_DEVICES).toBeUndefined();
    expect(planWorkerImage("cpu", inputs(), "1").config.env.NVIDIA_DRIVER_CAPABILITIES).toBeUndefined();
  });

  it("turns the config into docker import changes", () => {
    const changes = importChanges(planWorkerImage("gpu", inputs(), "1").config);
    expect(changes).toContain('CMD ["/usr/local/bin/node","/opt/svc/dist/runtime/worker.js"]');
    expect(changes).toContain("USER 1000:1000");
    expect(changes).toContain("WORKDIR /home/svc");
    expect(changes).toContain("ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility");
    expect(changes).toContain("LABEL svc.image.kind=gpu");
  });
});

describe("planServerImage", () => {
  const server = () => {
    const base = inputs();
    return {
      system: base.system,
      app: [...base.runtime, { path: "/opt/svc/bin/svc.js", mode: 0o755, size: 3, sha256: "sha-bin", content: Buffer.from("bin") }],
      hasCaBundle: true,
    };
  };

  it("runs `svc server` on all interfaces as root, with its data directory, named svc-server", () => {
    const plan = planServerImage(server(), "1.2.3");
    expect(plan.versionTag).toBe("svc-server:1.2.3");
    expect(plan.hashTag).toBe(`svc-server:${plan.hash.slice(0, 20)}`);
    expect(plan.config).toMatchObject({
      entrypoint: ["/usr/local/bin/node", "/opt/svc/bin/svc.js"],
      cmd: ["server", "--host", "0.0.0.0", "--port", "8600"],
      user: "0:0",
      workingDir: "/var/lib/svc",
    });
    expect(plan.config.env).toMatchObject({ SVC_DATA_DIR: "/var/lib/svc", NODE_ENV: "production", NODE_EXTRA_CA_CERTS: "/etc/ssl/certs/ca-certificates.crt" });
    expect(plan.config.labels).toMatchObject({ "svc.managed": "true", "svc.image.kind": "server", "svc.image.hash": plan.hash, "svc.version": "1.2.3" });
    const changes = importChanges(plan.config);
    expect(changes[0]).toBe('ENTRYPOINT ["/usr/local/bin/node","/opt/svc/bin/svc.js"]');
    expect(changes).toContain('CMD ["server","--host","0.0.0.0","--port","8600"]');
    const byPath = new Map(plan.entries.map((e) => [e.path, e]));
    expect(byPath.get("/var/lib/svc")).toMatchObject({ type: "directory", uid: 0 });
    expect(byPath.get("/opt/svc/bin/svc.js")).toMatchObject({ type: "file", mode: 0o755 });
    expect(JSON.parse(byPath.get("/opt/svc/package.json")!.file!.content!.toString())).toMatchObject({ version: "1.2.3", type: "module" });
  });

  it("is named by its inputs, apart from the worker images", () => {
    const a = planServerImage(server(), "1.2.3");
    expect(planServerImage(server(), "1.2.3").hash).toBe(a.hash);
    const changed = server();
    changed.app[0] = { ...changed.app[0]!, sha256: "sha-other" };
    expect(planServerImage(changed, "1.2.3").hash).not.toBe(a.hash);
    expect(planWorkerImage("cpu", inputs(), "1.2.3").hash).not.toBe(a.hash);
    expect(importChanges(planWorkerImage("cpu", inputs(), "1").config).some((c) => c.startsWith("ENTRYPOINT"))).toBe(false);
  });
});

describe("productionPackages (this package's real node_modules)", () => {
  it("holds every run-time dependency, transitively and with the native better-sqlite3, and no dev dependency", async () => {
    const packages = await productionPackages(repo);
    const dirs = packages.map((p) => p.imageDir);
    for (const name of ["better-sqlite3", "bindings", "pg", "dockerode", "commander", "@kubernetes/client-node", "tar-stream", "esbuild"])
      expect(dirs).toContain(`/opt/svc/node_modules/${name}`);
    for (const dev of ["vitest", "playwright-core", "openai", "zod"]) expect(dirs).not.toContain(`/opt/svc/node_modules/${dev}`);
    expect(new Set(dirs).size).toBe(dirs.length);
  });

  it("holds the SDK, a workspace link to packages/svc, under node_modules/svc", async () => {
    const sdk = (await productionPackages(repo)).find((p) => p.imageDir === "/opt/svc/node_modules/svc");
    expect(sdk).toMatchObject({ dir: join(repo, "packages", "svc"), linked: true });
  });
});

describe("planImageAction", () => {
  const plan = planWorkerImage("cpu", inputs(), "1.0.0");
  it("reuses an image with the same hash, tagging the version when it moved", () => {
    expect(planImageAction(plan, [{ id: "a", tags: [plan.hashTag, plan.versionTag] }])).toEqual({ action: "cached", id: "a" });
    expect(planImageAction(plan, [{ id: "b", tags: [plan.hashTag] }])).toEqual({ action: "tag", id: "b" });
    expect(planImageAction(plan, [{ id: "c", tags: ["svc-worker-cpu:0123", plan.versionTag] }])).toEqual({ action: "build" });
  });
});

describe("supersededImages", () => {
  it("names the other images of the same kind and version, not other versions or kinds", () => {
    const plan = planWorkerImage("cpu", inputs(), "1.0.0");
    const info = (Id: string, kind: string, version: string) => ({ Id, Labels: { "svc.image.kind": kind, "svc.version": version } }) as never;
    expect(
      supersededImages(plan, "new", [info("new", "cpu", "1.0.0"), info("old", "cpu", "1.0.0"), info("gpu", "gpu", "1.0.0"), info("v0", "cpu", "0.9.0")]),
    ).toEqual(["old"]);
  });
});

describe("planPrune", () => {
  const image = (over: Partial<WorkerImageInfo>): WorkerImageInfo => ({
    kind: "cpu",
    id: "x",
    tags: [],
    hash: "",
    version: "",
    createdAt: "",
    sizeBytes: 0,
    containers: 0,
    ...over,
  });
  it("removes unused images, keeping the current version's unless all", () => {
    const current = image({ id: "cur", tags: ["svc-worker-cpu:2.0.0", "svc-worker-cpu:aaa"] });
    const old = image({ id: "old", tags: ["svc-worker-cpu:bbb"] });
    const used = image({ id: "used", tags: ["svc-worker-cpu:1.0.0"], containers: 1 });
    expect(planPrune([current, old, used], { version: "2.0.0" }).map((i) => i.id)).toEqual(["old"]);
    expect(planPrune([current, old, used], { version: "2.0.0", all: true }).map((i) => i.id)).toEqual(["cur", "old"]);
  });
});

describe("runtime closure (real esbuild over this package's dist/)", () => {
  it("reaches the worker runtime and the production packages it imports, nothing from the CLI or service", async () => {
    const closure = await runtimeClosure(repo);
    const dist = closure.distFiles.map((f) => f.slice(repo.length).replace(/\\/g, "/"));
    expect(dist).toContain("dist/runtime/worker.js");
    expect(dist.some((f) => f.startsWith("dist/service/") || f.startsWith("dist/cli/"))).toBe(false);
    const names = closure.packages.map((p) => p.name);
    expect(names).toContain("tar-stream");
    for (const dev of ["vitest", "typescript", "esbuild", "better-sqlite3", "commander"]) expect(names).not.toContain(dev);
  });

  it("takes from the SDK (node_modules/svc, a workspace link) its package.json and the compiled files reached", async () => {
    const sdk = (await runtimeClosure(repo)).packages.find((p) => p.name === "svc");
    expect(sdk?.dir).toBe(join(repo, "packages", "svc"));
    expect(sdk?.files).toContain("package.json");
    expect(sdk?.files).toContain("dist/internal.js");
    expect(sdk?.files?.every((f) => f === "package.json" || (f.startsWith("dist/") && f.endsWith(".js")))).toBe(true);
  });

  it("refuses to build when the runtime is not compiled", async () => {
    const empty = mkdtempSync(join(tmpdir(), "svc-images-test-"));
    try {
      await expect(collectImageInputs({ packageRoot: empty })).rejects.toThrow(/worker runtime is not compiled/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
