// Worker images through a real registry (Debian's docker-registry, started by this test on 127.0.0.1):
// `svc images build --registry` pushes them and prints each by digest; a driver given the registry resolves the
// digest there and runs exactly that image, pulling it into the engine when it lacks it; a registry that does not
// answer is a clear error.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { registryWorkerImage } from "../../src/drivers/registry.js";
import { describeDocker, docker } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const REGISTRY_BIN = "/usr/bin/docker-registry";
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? "");
if (!existsSync(REGISTRY_BIN)) {
  if (inCi) throw new Error("docker-registry is not installed and CI is set: .ci/run installs it");
  process.stderr.write("[svc tests] skipping the registry tests: Debian's docker-registry is not installed\n");
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function svc(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  return spawnSync(process.execPath, [join(repo, "bin", "svc.js"), ...args], { env, encoding: "utf8", timeout: 300_000 });
}

describeDocker("worker images through a registry", () => {
  let work: string;
  let registry: string;
  let server: ChildProcess | undefined;
  beforeAll(async () => {
    if (!existsSync(REGISTRY_BIN)) return;
    work = mkdtempSync(join(tmpdir(), "svc-registry-"));
    const port = await freePort();
    registry = `127.0.0.1:${port}`;
    const config = join(work, "config.yml");
    writeFileSync(
      config,
      `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${join(work, "data")}\n  delete:\n    enabled: true\nhttp:\n  addr: ${registry}\n`,
    );
    server = spawn(REGISTRY_BIN, ["serve", config], { stdio: "ignore" });
    for (const deadline = Date.now() + 20_000; ; ) {
      const up = await fetch(`http://${registry}/v2/`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (Date.now() > deadline) throw new Error("the registry did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 60_000);
  afterAll(async () => {
    server?.kill();
    // The tags this test gave the local images in the registry's name (the images themselves stay).
    if (registry) {
      for (const image of await docker.listImages()) {
        for (const tag of image.RepoTags ?? [])
          if (tag.startsWith(`${registry}/`))
            await docker
              .getImage(tag)
              .remove()
              .catch(() => undefined);
        for (const digest of image.RepoDigests ?? [])
          if (digest.startsWith(`${registry}/`))
            await docker
              .getImage(digest)
              .remove()
              .catch(() => undefined);
      }
    }
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.skipIf(!existsSync(REGISTRY_BIN))(
    "pushes the worker image and a driver runs it by digest, pulled where missing",
    async () => {
      const built = svc(["images", "build", "--cpu", "--registry", registry, "--json"]);
      expect(built.status, built.stderr).toBe(0);
      const [image] = JSON.parse(built.stdout) as Array<{ kind: string; id: string; pushed: { tag: string; reference: string; digest: string } }>;
      expect(image!.kind).toBe("cpu");
      expect(image!.pushed.reference).toBe(`${registry}/svc-worker-cpu@${image!.pushed.digest}`);
      expect(image!.pushed.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
      // The registry holds it, under the digest printed.
      const catalog = (await (await fetch(`http://${registry}/v2/_catalog`)).json()) as { repositories: string[] };
      expect(catalog.repositories).toContain("svc-worker-cpu");
      const [, tag] = image!.pushed.tag.split(/:(?=[^:]+$)/);
      const head = await fetch(`http://${registry}/v2/svc-worker-cpu/manifests/${tag}`, {
        method: "HEAD",
        headers: { accept: "application/vnd.docker.distribution.manifest.v2+json" },
      });
      expect(head.headers.get("docker-content-digest")).toBe(image!.pushed.digest);

      // This engine forgets the registry's names for the image: the driver must pull by digest.
      await docker.getImage(image!.pushed.tag).remove();
      await docker
        .getImage(image!.pushed.reference)
        .remove()
        .catch(() => undefined);
      await expect(docker.getImage(image!.pushed.reference).inspect()).rejects.toThrow();
      const reference = await registryWorkerImage(docker, registry, "cpu");
      expect(reference).toBe(image!.pushed.reference);
      const pulled = await docker.getImage(reference).inspect();
      expect(pulled.Id).toBe(image!.id);
    },
    300_000,
  );

  it("says clearly when the registry does not answer", async () => {
    const port = await freePort();
    const r = svc(["images", "build", "--cpu", "--registry", `127.0.0.1:${port}`]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`Could not push 127.0.0.1:${port}/svc-worker-cpu`);
    expect(r.stderr).toMatch(/registry runs and answers/);
    // The tag it gave the image for that registry is gone again.
    expect((await docker.listImages()).flatMap((i) => i.RepoTags ?? []).filter((t) => t.startsWith(`127.0.0.1:${port}/`))).toEqual([]);
    const bad = svc(["images", "build", "--registry", "http://x/y"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("is not a registry address");
    await expect(registryWorkerImage(docker, `127.0.0.1:${port}`, "cpu")).rejects.toThrow(/Could not ask the registry/);
  }, 300_000);
});
