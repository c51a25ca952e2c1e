import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import type { WorkerLaunch, WorkerLogLine } from "./types.js";
import { createProcessDriver } from "./process.js";
import { testLaunch } from "./launch-fixture.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const RUNTIME_ENTRY = join(REPO, "dist/runtime/worker.js");
const STUBBORN = join(REPO, "fixtures/runtime-stubborn/ignore-term.mjs");

// A minimal handler honouring the LoadedHandler contract, written by hand: these tests are about processes,
// not bundling (test/runtime builds real handlers with esbuild).
const HANDLER = `export default { endpoint: "fns", kind: "queue", functionNames: ["f"], routes: [],
  async init() {}, invoke() { return { kind: "value", value: Promise.resolve(1) }; } };`;

async function writeArtifact(file: string): Promise<string> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  pack.entry({ name: "endpoints/fns/handler.mjs", mode: 0o644 }, HANDLER);
  pack.finalize();
  await collected;
  await writeFile(file, gzipSync(Buffer.concat(chunks)));
  return file;
}

let work: string;
let artifact: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-procdrv-"));
  artifact = await writeArtifact(join(work, "a.tar.gz"));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

function launch(workerId: string, lines: WorkerLogLine[], extra: Partial<WorkerLaunch> = {}): WorkerLaunch {
  return testLaunch({ workerId, artifactPath: artifact, onLog: (line) => lines.push(line), ...extra });
}

const firstLine = async (lines: WorkerLogLine[]) => {
  for (let i = 0; i < 200 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
  return lines[0]!;
};

describe("createProcessDriver", () => {
  it("pipes output line by line, extracts once, and stop() escalates to SIGKILL after the grace", async () => {
    const cacheDir = join(work, "cache-a");
    const driver = createProcessDriver({ runtimeEntry: STUBBORN, cacheDir, baseEnv: { PATH: process.env.PATH, SVC_API_KEY: "parent-secret" } });
    const a: WorkerLogLine[] = [];
    const b: WorkerLogLine[] = [];
    const [ha, hb] = await Promise.all([driver.start(launch("wa", a)), driver.start(launch("wb", b))]);
    const ra = JSON.parse((await firstLine(a)).text);
    const rb = JSON.parse((await firstLine(b)).text);
    expect(ra.env).toMatchObject({ SVC_WORKER_ID: "wa", USER_FLAG: "on", SVC_API_KEY: "owner-key", SVC_WORKER_TOKEN: "worker-token" });
    expect(rb.env.SVC_ARTIFACT_DIR).toBe(ra.env.SVC_ARTIFACT_DIR);
    expect(ra.cwd).toBe(ra.env.SVC_ARTIFACT_DIR);
    expect((await readdir(cacheDir)).filter((f) => !f.startsWith("."))).toHaveLength(1);

    const started = Date.now();
    const exit = await ha.stop(300);
    expect(exit).toEqual({ code: null, signal: "SIGKILL" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(a.some((l) => l.stream === "stderr" && l.text === "got SIGTERM, ignoring it")).toBe(true);

    hb.kill();
    expect(await hb.exited).toEqual({ code: null, signal: "SIGKILL" });
    await driver.close();
  });

  it("close() stops every worker it started", async () => {
    const driver = createProcessDriver({ runtimeEntry: STUBBORN, cacheDir: join(work, "cache-b"), closeGraceMs: 200 });
    const logs: WorkerLogLine[][] = [[], [], []];
    const handles = await Promise.all(logs.map((l, i) => driver.start(launch(`w${i}`, l))));
    await Promise.all(logs.map(firstLine));
    await driver.close();
    for (const h of handles) expect((await h.exited).signal).toBe("SIGKILL");
  });

  it("runs the real runtime: a worker whose handler cannot load exits 1 and says why", async () => {
    const driver = createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache-c") });
    const lines: WorkerLogLine[] = [];
    const handle = await driver.start(launch("w-ghost", lines, { endpointName: "ghost" }));
    expect(await handle.exited).toEqual({ code: 1, signal: null });
    expect(lines.map((l) => l.text).join("\n")).toMatch(/worker failed to start: The artifact has no handler for endpoint "ghost"/);
    await driver.close();
  });

  it("runs the real runtime: SIGTERM stops a worker that is still waiting for its service, with exit 0", async () => {
    const driver = createProcessDriver({ runtimeEntry: RUNTIME_ENTRY, cacheDir: join(work, "cache-d") });
    const lines: WorkerLogLine[] = [];
    // A service that accepts connections and never answers: once the worker calls it, its runtime is up (and
    // handles SIGTERM), however long node took to start on a loaded machine.
    const sockets: Socket[] = [];
    let called!: () => void;
    const calledBack = new Promise<void>((r) => (called = r));
    const silent = createServer((socket) => {
      sockets.push(socket);
      called();
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const { port } = silent.address() as AddressInfo;
    const handle = await driver.start(launch("w-waiting", lines, { apiUrl: `http://127.0.0.1:${port}` }));
    await calledBack;
    const started = Date.now();
    expect(await handle.stop(5000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(3000);
    await driver.close();
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
});

describe("adopting the workers of an earlier run", () => {
  it("finds a worker a driver of a killed service left running, by its record, and sees it end", async () => {
    const stateDir = join(work, "state-adopt");
    const first = createProcessDriver({ runtimeEntry: STUBBORN, cacheDir: join(work, "cache-adopt"), stateDir, baseEnv: { PATH: process.env.PATH } });
    const lines: WorkerLogLine[] = [];
    const started = await first.start(launch("wadopt", lines, { revision: "rev-7" }));
    await firstLine(lines);
    // A record nobody runs any more, and one whose pid is alive but another process: both workers ended while
    // no service watched them, so they are returned as ended (their jobs go back to the queue), not adopted.
    await writeFile(join(stateDir, "wgone.json"), JSON.stringify({ pid: 999_999, workerId: "wgone", endpointId: "ep1" }));
    await writeFile(join(stateDir, "wother.json"), JSON.stringify({ pid: process.pid, workerId: "wother", endpointId: "ep2" }));

    // Another driver on the same state directory: the service after a restart.
    const second = createProcessDriver({ runtimeEntry: STUBBORN, cacheDir: join(work, "cache-adopt"), stateDir });
    const found = await second.adopt!();
    const summary = found.map((a) => ({ id: a.handle.workerId, endpointId: a.endpointId, revision: a.revision, ended: a.ended ?? false }));
    expect(summary.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { id: "wadopt", endpointId: "ep1", revision: "rev-7", ended: false },
      { id: "wgone", endpointId: "ep1", revision: undefined, ended: true },
      { id: "wother", endpointId: "ep2", revision: undefined, ended: true },
    ]);
    for (const gone of found.filter((a) => a.ended)) expect(await gone.handle.exited).toEqual({ code: null, signal: null });
    const adopted = found.filter((a) => !a.ended);
    expect((await readdir(stateDir)).sort()).toEqual(["wadopt.json"]);
    // Each is found once.
    expect(await second.adopt!()).toEqual([]);

    // It ignores SIGTERM: stop() escalates to SIGKILL after the grace, and the poll sees it gone.
    const at = Date.now();
    await adopted[0]!.handle.stop(300);
    expect(Date.now() - at).toBeLessThan(3000);
    expect(await started.exited).toMatchObject({ signal: "SIGKILL" });
    await new Promise((r) => setTimeout(r, 100));
    expect(await readdir(stateDir)).toEqual([]);
    await first.close();
    await second.close();
  });
});
