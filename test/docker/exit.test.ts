// A service process that dies of an uncaught error without close(): its worker containers must not outlive it.
// A real child process runs the compiled driver (dist/, compile first) and starts a real container.

import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { buildProject } from "../../src/build/index.js";
import { cleanupStale } from "../../src/drivers/docker.js";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { describeDocker, docker, leftovers } from "./engine.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const session = `exittest${Date.now().toString(36)}`;
let dir: string | undefined;

afterAll(async () => {
  await cleanupStale({ [LABELS.session]: session }, { docker }).catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
  // The killed child staged its worker's artifact there and never reached its own clean-up.
  rmSync(join(tmpdir(), `svc-worker-artifacts-${session}`), { recursive: true, force: true });
});

const CHILD = `
import { createDockerDriver } from ${JSON.stringify(`${repo}dist/drivers/docker.js`)};
const [artifactPath, session] = process.argv.slice(1);
const driver = createDockerDriver({ session, networkScope: "session" });
// Nothing answers on port 9 (discard): the runtime inside keeps retrying, so the container stays up.
const handle = await driver.start({ workerId: "wexit1", endpointId: "e1", endpointName: "orphan", app: "a", env: "e", artifactPath,
  apiUrl: "http://127.0.0.1:9", workerToken: "t", environment: {}, maxConcurrency: 1, computeType: "CPU", gpuTypeIds: [], onLog: () => {} });
process.stdout.write(handle.containerId + "\\n");
setTimeout(() => { throw new Error("the service crashed"); }, 300);
`;

describeDocker("Docker driver when the service process dies", () => {
  it("removes its containers on exit even without close()", async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-docker-exit-"));
    cpSync(join(repo, "fixtures", "docker-app"), join(dir, "app"), { recursive: true });
    const build = await buildProject(join(dir, "app"));
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD, build.artifactPath, session], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(stderr).toContain("the service crashed");
    expect(code).not.toBe(0);
    const containerId = stdout.trim();
    expect(containerId).toMatch(/^[0-9a-f]{64}$/);
    expect((await leftovers(session)).containers).toEqual([]);
    await expect(docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  }, 90_000);
});
