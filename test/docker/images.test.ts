// Worker images with a real engine: built from this machine's Node and the compiled runtime (compile first),
// cached by content hash, runnable, listed and pruned; also through `svc images` (node bin/svc.js).

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";
import { collectImageInputs } from "../../src/drivers/image-inputs.js";
import { planWorkerImage } from "../../src/drivers/image-plan.js";
import { applyImagePlan, ensureWorkerImage, listWorkerImages } from "../../src/drivers/images.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { SVC_VERSION } from "../../src/version.js";
import { describeDocker, docker, leftovers, runOnce } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const session = `imgtest${Date.now().toString(36)}`;
const scratchVersions: string[] = [];

const svc = async (...args: string[]) => {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [`${repo}bin/svc.js`, ...args], {
      encoding: "utf8",
      env: { ...process.env, NO_COLOR: "1" },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
};

afterAll(async () => {
  // Images of throwaway versions made here; the real ones stay (other tests and users use them).
  for (const image of await listWorkerImages(docker).catch(() => [])) {
    if (scratchVersions.includes(image.version))
      await docker
        .getImage(image.id)
        .remove({ force: true })
        .catch(() => undefined);
  }
  await cleanupStale({ [LABELS.session]: session }, { docker }).catch(() => undefined);
});

describeDocker("worker images (real Docker engine)", () => {
  it("builds an image from the host's inputs once; the same inputs again are a fast no-op with the same id", async () => {
    const version = `0.0.0-test.${Date.now().toString(36)}`;
    scratchVersions.push(version);
    const inputs = await collectImageInputs();
    const plan = planWorkerImage("cpu", inputs, version);
    const first = await applyImagePlan(docker, plan);
    expect(first.cached).toBe(false);
    const started = Date.now();
    const again = await applyImagePlan(docker, planWorkerImage("cpu", await collectImageInputs(), version));
    expect(again).toEqual({ id: first.id, cached: true });
    expect(Date.now() - started).toBeLessThan(3000);
    const inspected = await docker.getImage(`svc-worker-cpu:${version}`).inspect();
    expect(inspected.Id).toBe(first.id);
    expect(inspected.RepoTags).toEqual(expect.arrayContaining([`svc-worker-cpu:${version}`, plan.hashTag]));
    expect(inspected.Config.Labels).toMatchObject({ [LABELS.imageKind]: "cpu", [LABELS.imageHash]: plan.hash, [LABELS.version]: version });
    expect(inspected.Config.User).toBe("1000:1000");
  }, 120_000);

  it("ensureWorkerImage gives the manifest's imageName, cached the second time", async () => {
    const first = await ensureWorkerImage(docker, "cpu");
    expect(first.name).toBe(`svc-worker-cpu:${SVC_VERSION}`);
    const second = await ensureWorkerImage(docker, "cpu");
    expect(second).toMatchObject({ id: first.id, cached: true });
    expect(second.durationMs).toBeLessThan(3000);
  }, 120_000);

  it("a container from the CPU image runs node as the non-root user with the runtime's version", async () => {
    const { name } = await ensureWorkerImage(docker, "cpu");
    const result = await runOnce(
      name,
      [
        "node",
        "-e",
        "const fs = require('fs'); console.log(JSON.stringify({ svc: JSON.parse(fs.readFileSync('/opt/svc/package.json', 'utf8')).version, node: process.version, uid: process.getuid(), runtime: fs.existsSync('/opt/svc/dist/runtime/worker.js') }))",
      ],
      session,
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ svc: SVC_VERSION, node: process.version, uid: 1000, runtime: true });
  }, 60_000);

  it("the runtime finds the SDK in the image: svc/internal resolves under /opt/svc/node_modules/svc and loads", async () => {
    const { name } = await ensureWorkerImage(docker, "cpu");
    const script =
      "import { createRequire } from 'node:module'; const path = createRequire('/opt/svc/dist/runtime/worker.js').resolve('svc/internal'); " +
      "const sdk = await import(path); console.log(JSON.stringify({ path, setRuntime: typeof sdk.setRuntime }))";
    const result = await runOnce(name, ["node", "--input-type=module", "-e", script], session);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ path: "/opt/svc/node_modules/svc/dist/internal.js", setRuntime: "function" });
  }, 60_000);

  it("the GPU image is the same runtime with the NVIDIA environment, and names no GPUs of its own (each worker is given its own)", async () => {
    const { name } = await ensureWorkerImage(docker, "gpu");
    const result = await runOnce(
      name,
      [
        "node",
        "-e",
        "console.log(process.env.NVIDIA_VISIBLE_DEVICES, process.env.NVIDIA_DRIVER_CAPABILITIES, require('fs').existsSync('/opt/svc/dist/runtime/worker.js'))",
      ],
      session,
    );
    expect(result.stdout.trim()).toBe("undefined compute,utility true");
  }, 60_000);

  it("svc images build|list|prune: JSON out, cached builds, and prune removes only unused images of other versions", async () => {
    const built = await svc("images", "build", "--cpu", "--json");
    expect(built.code).toBe(0);
    const images = JSON.parse(built.stdout) as Array<{ kind: string; name: string; cached: boolean }>;
    expect(images).toEqual([expect.objectContaining({ kind: "cpu", name: `svc-worker-cpu:${SVC_VERSION}`, cached: true })]);

    const old = `0.0.0-old.${Date.now().toString(36)}`;
    scratchVersions.push(old);
    const stale = await applyImagePlan(docker, planWorkerImage("cpu", await collectImageInputs(), old));

    const listed = await svc("images", "list", "--json");
    expect(listed.code).toBe(0);
    const list = JSON.parse(listed.stdout) as Array<{ id: string; tags: string[] }>;
    expect(list.map((i) => i.id)).toContain(stale.id);
    expect(list.some((i) => i.tags.includes(`svc-worker-cpu:${SVC_VERSION}`))).toBe(true);
    const human = await svc("images", "list");
    expect(human.stdout).toMatch(/^KIND\s+TAGS/);
    expect(human.stdout).toContain(`svc-worker-cpu:${old}`);

    const pruned = await svc("images", "prune", "--json");
    expect(pruned.code).toBe(0);
    expect((JSON.parse(pruned.stdout) as { removed: Array<{ id: string }> }).removed.map((i) => i.id)).toContain(stale.id);
    const after = await listWorkerImages(docker);
    expect(after.map((i) => i.id)).not.toContain(stale.id);
    expect(after.some((i) => i.tags.includes(`svc-worker-cpu:${SVC_VERSION}`))).toBe(true);
  }, 120_000);

  it("cleanupStale removes a crashed session's containers, networks and volumes by label", async () => {
    const crashed = `${session}-crashed`;
    const labels = { [LABELS.managed]: "true", [LABELS.session]: crashed };
    const { name } = await ensureWorkerImage(docker, "cpu");
    await docker.createNetwork({ Name: `svc-test-${crashed}`, Labels: labels });
    await docker.createVolume({ Name: `svc-vol-test-${crashed}`, Labels: labels });
    await docker
      .createContainer({ Image: name, Cmd: ["node", "-e", "setTimeout(() => {}, 60000)"], Labels: labels, HostConfig: { NetworkMode: `svc-test-${crashed}` } })
      .then((c) => c.start());
    expect((await leftovers(crashed)).containers).toHaveLength(1);
    const removed = await cleanupStale({ [LABELS.session]: crashed }, { docker });
    expect(removed).toEqual({ containers: 1, networks: 1, volumes: 1 });
    expect(await leftovers(crashed)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 60_000);
});
