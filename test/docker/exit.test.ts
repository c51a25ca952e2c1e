// A service process that dies of an uncaught error without close(): its worker containers must not outlive it, nor
// (its session being a random one no later process adopts) the artifacts it staged for them.
// A real child process runs the compiled driver (dist/, compile first) and starts a real container.

import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { cleanupStale } from "../../src/drivers/docker-host.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { describeDocker, docker, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
/** The child's driver's own (random) session, as it prints it. */
let session: string | undefined;
let dir: string | undefined;
const stagedArtifacts = (s: string) => join(tmpdir(), `svc-worker-artifacts-${s}`);

afterAll(async () => {
  if (session) {
    await cleanupStale({ [LABELS.session]: session }, { docker }).catch(() => undefined);
    rmSync(stagedArtifacts(session), { recursive: true, force: true });
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const CHILD = `
import { createDockerDriver } from ${JSON.stringify(`${repo}dist/drivers/docker.js`)};
const [artifactPath] = process.argv.slice(1);
const driver = createDockerDriver({ networkScope: "session" });
// Nothing answers on port 9 (discard): the runtime inside keeps retrying, so the container stays up.
const handle = await driver.start({ workerId: "wexit1", endpointId: "e1", endpointName: "orphan", app: "a", env: "e", artifactPath,
  apiUrl: "http://127.0.0.1:9", workerToken: "t", environment: {}, maxConcurrency: 1, computeType: "CPU", gpuTypeIds: [], onLog: () => {} });
process.stdout.write(driver.session + " " + handle.containerId + "\\n");
setTimeout(() => { throw new Error("the service crashed"); }, 300);
`;

describeDocker("Docker driver when the service process dies", () => {
  it("removes its containers and staged artifacts on exit even without close()", async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-docker-exit-"));
    cpSync(join(repo, "fixtures", "docker-app"), join(dir, "app"), { recursive: true });
    const build = await buildProject(join(dir, "app"));
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD, build.artifactPath], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(stderr).toContain("the service crashed");
    expect(code).not.toBe(0);
    const [printedSession, containerId] = stdout.trim().split(" ");
    session = printedSession;
    expect(containerId).toMatch(/^[0-9a-f]{64}$/);
    expect((await leftovers(session!)).containers).toEqual([]);
    expect(existsSync(stagedArtifacts(session!)), "the staged artifacts outlived the process").toBe(false);
    await expect(docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  }, 90_000);
});
