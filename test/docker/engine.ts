// Shared by the Docker tests: whether a real engine answers, and a describe() that skips (with a printed notice)
// when none does, except in CI (CI=true) where a missing engine fails the run: .ci/run starts one.

import Docker from "dockerode";
import { describe, it } from "vitest";
import { dockerAvailable, LABELS } from "../../src/drivers/docker-engine.js";

export const docker = new Docker();
export const engineUp = await dockerAvailable(docker, 5000);
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? "");

export function describeDocker(name: string, body: () => void): void {
  if (engineUp) {
    describe(name, body);
    return;
  }
  if (inCi) {
    describe(name, () => {
      it("needs a Docker engine", () => {
        throw new Error("No Docker engine answers, and CI=true: run scripts/ensure-docker.sh before the tests");
      });
    });
    return;
  }
  process.stderr.write(`[svc tests] skipping "${name}": no Docker engine answers (start one with scripts/ensure-docker.sh)\n`);
  describe.skip(name, body);
}

/** Everything of a session still in the engine (containers, networks, volumes carrying its label). */
export async function leftovers(session: string): Promise<{ containers: string[]; networks: string[]; volumes: string[] }> {
  const filters = { label: [`${LABELS.session}=${session}`] };
  const [containers, networks, volumes] = await Promise.all([
    docker.listContainers({ all: true, filters }),
    docker.listNetworks({ filters }),
    docker.listVolumes({ filters }),
  ]);
  return {
    containers: containers.map((c) => c.Names[0] ?? c.Id),
    networks: networks.map((n) => n.Name),
    volumes: (volumes.Volumes ?? []).map((v) => v.Name),
  };
}

/** Run a one-off command in a container of `image` (labelled with `session`); its stdout, stderr and exit code. */
export async function runOnce(image: string, cmd: string[], session: string): Promise<{ stdout: string; stderr: string; code: number }> {
  const container = await docker.createContainer({ Image: image, Cmd: cmd, Labels: { [LABELS.managed]: "true", [LABELS.session]: session } });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    const raw = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
    return { ...demux(raw), code: StatusCode };
  } finally {
    await container.remove({ force: true });
  }
}

/** Docker's multiplexed log format: 8-byte headers (stream, 0, 0, 0, size BE32) before each frame. */
function demux(raw: Buffer): { stdout: string; stderr: string } {
  let stdout = "";
  let stderr = "";
  for (let at = 0; at + 8 <= raw.length; ) {
    const size = raw.readUInt32BE(at + 4);
    const text = raw.subarray(at + 8, at + 8 + size).toString("utf8");
    if (raw[at] === 2) stderr += text;
    else stdout += text;
    at += 8 + size;
  }
  return { stdout, stderr };
}
