// Secrets and variables in `svc dev` as users expect: a secret the endpoint names comes from .env / .env.local /
// the environment where the dev service has none; an edit of .env (which .gitignore names) reloads the workers;
// a secret set nowhere says what to do and the session runs on; `svc secret set` works against the session.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startDevSession, type DevEvent, type DevSessionHandle } from "../../src/dev/session.js";
import { REPO } from "../lb/harness.js";
import { until } from "../service/helpers.js";

let work: string;
let project: string;
let session: DevSessionHandle;
const events: DevEvent[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-env-"));
  project = join(work, "env-app");
  mkdirSync(join(project, "src"), { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "env-app", type: "module", private: true }));
  writeFileSync(join(project, ".gitignore"), "node_modules\n.svc\n.env\n.env.local\n");
  writeFileSync(
    join(project, "src", "token.mjs"),
    'import { Endpoint } from "svc";\nexport const show = Endpoint({ name: "token", workers: [0, 1], secrets: ["DEV_ENV_TOKEN"] })(async function show() { return { token: process.env.DEV_ENV_TOKEN ?? null, local: process.env.DEV_ENV_LOCAL ?? null }; });\n',
  );
  delete process.env.DEV_ENV_TOKEN;
  session = await startDevSession({ root: project, port: 0, watch: true, pool: 0, sandbox: "none", onEvent: (e) => events.push(e) });
}, 120_000);

afterAll(async () => {
  await session?.close();
  rmSync(work, { recursive: true, force: true });
});

const failures = () => events.filter((e): e is Extract<DevEvent, { type: "rebuild-failed" }> => e.type === "rebuild-failed");
const deploys = () => events.filter((e) => e.type === "deployed").length;

async function runsync(): Promise<{ status: number; output?: { token: string | null; local: string | null } }> {
  const e = session.endpoints.find((x) => x.name === "token")!;
  const res = await fetch(`${e.url}/runsync`, {
    method: "POST",
    headers: { authorization: `Bearer ${session.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ input: {} }),
  });
  const body = (await res.json()) as { output?: { token: string | null; local: string | null } };
  return { status: res.status, output: body.output };
}

it("a secret set nowhere: the session runs and says what to put where", () => {
  expect(failures()).toHaveLength(1);
  const error = failures()[0]!.error as { message: string; problems: string[] };
  expect(error.message).toContain("DEV_ENV_TOKEN");
  expect(error.problems.join("\n")).toContain("add `DEV_ENV_TOKEN=...` to .env");
  expect(session.endpoints).toEqual([]);
});

it("takes the secret from .env (which .gitignore names) and reloads the workers when .env or .env.local changes", async () => {
  let before = deploys();
  writeFileSync(join(project, ".env"), "DEV_ENV_TOKEN=from-dotenv # a comment\n");
  await until(() => deploys() === before + 1, 60_000);
  expect((await runsync()).output).toEqual({ token: "from-dotenv", local: null });
  before = deploys();
  writeFileSync(join(project, ".env.local"), "DEV_ENV_TOKEN=from-local\n");
  await until(() => deploys() === before + 1, 60_000);
  await until(async () => (await runsync()).output?.token === "from-local", 30_000);
}, 120_000);

it("`svc secret set` without --url sets it on the running dev session, and that value wins over .env", async () => {
  const env = { ...process.env, HOME: work };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
  // Not spawnSync: the dev service runs in this process and must answer meanwhile.
  const run = promisify(execFile)(process.execPath, [join(REPO, "bin", "svc.js"), "secret", "set", "DEV_ENV_TOKEN"], {
    cwd: project,
    env,
    encoding: "utf8",
    timeout: 30_000,
  });
  run.child.stdin!.end("by-hand\n");
  const r = await run;
  expect(r.stderr + r.stdout).toMatch(/Set secret DEV_ENV_TOKEN/);
  const before = deploys();
  writeFileSync(join(project, ".env.local"), "# nothing here now\n");
  await until(() => deploys() === before + 1, 60_000);
  await until(async () => (await runsync()).output?.token === "by-hand", 30_000);
}, 120_000);
