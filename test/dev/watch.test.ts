// Every save is seen, whatever the editor does: a real `svc dev` session (library) on a copy of fixtures/dev-app
// with its real watcher. A plain write and an atomic save (write a temporary file, rename it over the original, as
// vim, VS Code, JetBrains and `sed -i` do) each trigger exactly one rebuild, five in a row five rebuilds; a file
// .gitignore names triggers none.

import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startDevSession, WATCH_DEBOUNCE_MS, type DevEvent, type DevSessionHandle } from "../../src/dev/session.js";
import { REPO, until } from "../lb/harness.js";
import { processWorkerPids } from "../server-process.js";

let work: string;
let project: string;
let session: DevSessionHandle;
const events: DevEvent[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-watch-"));
  project = join(work, "dev-app");
  cpSync(join(REPO, "fixtures", "dev-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  writeFileSync(join(project, ".gitignore"), "generated/\n*.local.ts\n");
  // No pre-booted runtimes: workerPids() finds workers by the environment they were started with, and a pooled
  // runtime was started with the pool's (its claim changes process.env, not /proc/<pid>/environ).
  session = await startDevSession({ root: project, port: 0, watch: true, pool: 0, onEvent: (e) => events.push(e) });
}, 120_000);

afterAll(async () => {
  await session?.close();
  rmSync(work, { recursive: true, force: true });
});

const rebuilds = () => events.filter((e) => e.type === "built").length;

/** Wait until `count` builds happened and no more come for a while (the debounce and the rebuild itself). */
async function settled(count: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  while (rebuilds() < count && Date.now() < deadline) await sleep(50);
  await sleep(WATCH_DEBOUNCE_MS * 4 + 500);
  return rebuilds();
}

function sourceFile(): string {
  const dir = join(project, "src");
  return join(dir, readdirSync(dir).find((f) => f.endsWith(".ts"))!);
}

it("sees every plain write and every atomic save, one rebuild each", async () => {
  const file = sourceFile();
  let count = await settled(1);
  for (let i = 0; i < 5; i++) {
    const text = readFileSync(file, "utf8");
    if (i % 2 === 0) writeFileSync(file, `${text}\n// plain write ${i}\n`);
    else {
      // Atomic save: a new file renamed over the old one (a new inode each time).
      const temp = `${file}.swp${i}`;
      writeFileSync(temp, `${text}\n// atomic save ${i}\n`);
      renameSync(temp, file);
    }
    count = await settled(count + 1);
  }
  expect(count).toBe(6);
  // Five more atomic saves in a row, each after the last settled: five more rebuilds.
  for (let i = 0; i < 5; i++) {
    const temp = `${file}.tmp`;
    writeFileSync(temp, `${readFileSync(file, "utf8")}\n// again ${i}\n`);
    renameSync(temp, file);
    count = await settled(count + 1);
  }
  expect(count).toBe(11);
}, 120_000);

it("moves to the next free port when the default is taken, and says so", async () => {
  const { createServer } = await import("node:net");
  // A taken port whose next one is free.
  let blocker: import("node:net").Server | undefined;
  let port = 0;
  for (let attempt = 0; attempt < 20 && !blocker; attempt++) {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
    port = (s.address() as { port: number }).port;
    // The next port for the service, and the one after for its S3 API.
    const freeAt = (p: number) =>
      new Promise<boolean>((r) => {
        const next = createServer();
        next.once("error", () => r(false)).listen(p, "127.0.0.1", () => next.close(() => r(true)));
      });
    const free = (await freeAt(port + 1)) && (await freeAt(port + 2));
    if (free) blocker = s;
    else s.close();
  }
  const seen: DevEvent[] = [];
  const second = await startDevSession({ root: project, defaultPort: port, dataDir: join(work, "second-data"), onEvent: (e) => seen.push(e) });
  try {
    expect(second.service.port).toBe(port + 1);
    expect(seen).toContainEqual({ type: "port-fallback", requested: port, port: port + 1 });
  } finally {
    await second.close();
    blocker?.close();
  }
}, 120_000);

it("ignores what .gitignore names", async () => {
  const before = await settled(rebuilds());
  mkdirSync(join(project, "generated"), { recursive: true });
  writeFileSync(join(project, "generated", "out.ts"), "export const x = 1;\n");
  writeFileSync(join(project, "src", "notes.local.ts"), "export const y = 2;\n");
  expect(await settled(before)).toBe(before);
}, 60_000);

/** Pids of this project's worker processes serving `endpoint`. */
function workerPids(endpoint: string): number[] {
  return processWorkerPids(work)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`SVC_ENDPOINT_NAME=${endpoint}`);
      } catch {
        return false; // the process ended meanwhile
      }
    })
    .sort();
}

it("replaces only the endpoints whose code changed, and says which endpoints came and went", async () => {
  const greeter = session.endpoints.find((e) => e.name === "greeter")!;
  const run = await fetch(`${greeter.url}/runsync`, {
    method: "POST",
    headers: { authorization: `Bearer ${session.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ input: { who: "warm" } }),
  });
  expect(((await run.json()) as { status: string }).status).toBe("COMPLETED");
  const warm = workerPids("greeter");
  expect(warm.length).toBeGreaterThan(0);

  // Change tally's code only.
  let count = await settled(rebuilds());
  const tally = join(project, "src", "tally.ts");
  writeFileSync(tally, `${readFileSync(tally, "utf8")}\n// only tally changes\n`);
  count = await settled(count + 1);
  await sleep(1500);
  expect(workerPids("greeter")).toEqual(warm);

  // A new endpoint, then the same file removed. Each save's deploy is waited for, not only its build: on a loaded
  // machine a deploy can end after the builds settled.
  const deploys = () => events.filter((e) => e.type === "deployed") as Array<Extract<DevEvent, { type: "deployed" }>>;
  const deployedAfter = async (before: number) => {
    await until("the save's deploy", () => deploys().length > before || undefined, 30_000);
    return deploys().at(-1)!;
  };
  // Every build so far has its deploy (the previous save's may end late).
  await until("each build's deploy", () => deploys().length >= rebuilds() || undefined, 30_000);
  let deployed = deploys().length;
  writeFileSync(
    join(project, "src", "newbie.mjs"),
    'import { Endpoint } from "svc";\nexport const hi = Endpoint({ name: "newbie", workers: [0, 1] })(async function hi() { return 1; });\n',
  );
  count = await settled(count + 1);
  const added = await deployedAfter(deployed);
  expect(added.added).toEqual(["newbie"]);
  deployed = deploys().length;
  rmSync(join(project, "src", "newbie.mjs"));
  await settled(count + 1);
  const removed = await deployedAfter(deployed);
  expect(removed.removed).toEqual(["newbie"]);
  expect(workerPids("greeter")).toEqual(warm);
}, 120_000);
