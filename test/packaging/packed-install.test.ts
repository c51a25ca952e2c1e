// End to end, as a user installs svc: both packages packed with `npm pack` (the SDK `svc` from packages/svc, the
// CLI `svc-cli` from the repository root), a fresh project with one endpoint that imports `Endpoint` from "svc".
// The SDK installed alone must stay small and compile nothing; with the CLI as a dev dependency, the project
// builds (`npx svc build`), runs a job under `svc dev`, and deploys to a `svc server` of the installed CLI.
// Needs the npm registry (or npm's cache) for the CLI's own dependencies; one install of each kind per run.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { firstJsonOnStdout } from "../cli-output.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SDK_LIMIT_BYTES = 5 * 1024 * 1024;
const KEY = "packed-install-admin-key";

/** This process's environment without svc's settings or npm's (a test run under `npm test` carries npm_config_*). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: "true", NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k.startsWith("npm_")) delete env[k];
  return { ...env, ...extra };
}

function run(command: string, args: string[], cwd: string, env = cleanEnv(), timeout = 300_000) {
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout });
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} exited ${result.status}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** `npm pack` of the package in `dir` into `into`; the tarball's path. Compiled already: no lifecycle scripts. */
function pack(dir: string, into: string): string {
  const [packed] = JSON.parse(run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", into], dir)) as Array<{ filename: string }>;
  return join(into, packed!.filename);
}

/** Bytes of the files under `dir` (links not followed). */
function sizeOf(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(path);
    else if (entry.isFile()) total += lstatSync(path).size;
  }
  return total;
}

/** Every package directory under a node_modules, nested ones included. */
function packagesUnder(modules: string): string[] {
  const found: string[] = [];
  if (!existsSync(modules)) return found;
  for (const entry of readdirSync(modules, { withFileTypes: true })) {
    if (entry.name.startsWith(".")) continue;
    const dirs = entry.name.startsWith("@") ? readdirSync(join(modules, entry.name)).map((n) => join(modules, entry.name, n)) : [join(modules, entry.name)];
    for (const dir of dirs) {
      if (!existsSync(join(dir, "package.json"))) continue;
      found.push(dir, ...packagesUnder(join(dir, "node_modules")));
    }
  }
  return found;
}

/** What would compile or run at install: an install script, or a binding.gyp (npm runs node-gyp for it). */
function installWork(dir: string): string | undefined {
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts?: Record<string, string>; gypfile?: boolean };
  const script = ["preinstall", "install", "postinstall"].find((s) => pkg.scripts?.[s]);
  if (script) return `${script}: ${pkg.scripts![script]}`;
  if (pkg.gypfile || existsSync(join(dir, "binding.gyp"))) return "binding.gyp";
  return undefined;
}

async function runsync(url: string, apiKey: string, input: unknown): Promise<{ status: number; body: { status?: string; output?: unknown; error?: string } }> {
  const res = await fetch(`${url}/runsync`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ input }),
  });
  return { status: res.status, body: (await res.json()) as { status?: string; output?: unknown } };
}

/** Stopped as a user stops it (Ctrl-C, or SIGTERM for the server); SIGKILL only if it hangs. */
async function stop(child: ChildProcessWithoutNullStreams | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}

let work: string;
let project: string;
let sdkTarball: string;
let cliTarball: string;
let bin: string;
const children: ChildProcessWithoutNullStreams[] = [];
const measured: Record<string, string> = {};

function writeProject(dependencies: Record<string, string>, devDependencies: Record<string, string> = {}) {
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "packed-app", version: "1.0.0", private: true, type: "module", dependencies, devDependencies }, null, 2),
  );
}

beforeAll(() => {
  for (const built of ["dist/cli/main.js", "dist/runtime/worker.js", "packages/svc/dist/index.js"]) {
    if (!existsSync(join(REPO, built))) throw new Error(`svc is not compiled (${built} is missing): run \`npm run build\` first`);
  }
  work = mkdtempSync(join(tmpdir(), "svc-packed-install-"));
  sdkTarball = pack(join(REPO, "packages", "svc"), work);
  cliTarball = pack(REPO, work);
  project = join(work, "app");
  mkdirSync(join(project, "src"), { recursive: true });
  writeFileSync(
    join(project, "src", "hello.ts"),
    [
      'import { Endpoint } from "svc";',
      "",
      'export const hello = Endpoint({ name: "hello" })(async function hello(input: { who?: string }) {',
      '  return { greeting: `hello, ${input.who ?? "world"}` };',
      "});",
      "",
    ].join("\n"),
  );
}, 300_000);

afterAll(async () => {
  for (const child of children) await stop(child, "SIGTERM");
  if (Object.keys(measured).length > 0) console.log(`packed install: ${JSON.stringify(measured)}`);
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

/** The repository's compiled build of native package `name` in the project, when the versions match; else npm rebuilds it. */
function reuseNativeBuild(projectDir: string, name: string): void {
  const mine = join(REPO, "node_modules", name);
  const theirs = join(projectDir, "node_modules", name);
  const version = (dir: string) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version as string;
  if (existsSync(join(mine, "build", "Release")) && version(mine) === version(theirs)) {
    cpSync(join(mine, "build"), join(theirs, "build"), { recursive: true });
    return;
  }
  run("npm", ["rebuild", name], projectDir, cleanEnv({ JOBS: "max" }), 600_000);
}

describe("the svc SDK installed alone from its packed tarball", () => {
  beforeAll(() => {
    writeProject({ svc: `file:${sdkTarball}` });
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], project);
  }, 300_000);

  it("is under 5 MB of node_modules", () => {
    const bytes = sizeOf(join(project, "node_modules"));
    measured.sdkAloneBytes = String(bytes);
    expect(bytes).toBeLessThan(SDK_LIMIT_BYTES);
  });

  it("compiles and runs nothing at install: no install script, no binding.gyp", () => {
    const packages = packagesUnder(join(project, "node_modules"));
    expect(packages.map((dir) => dir.slice(project.length + 1))).toContain("node_modules/svc");
    expect(packages.flatMap((dir) => (installWork(dir) ? [`${dir}: ${installWork(dir)}`] : []))).toEqual([]);
  });

  it("ships its compiled entries and types, no sources or tests", () => {
    const sdk = join(project, "node_modules", "svc");
    for (const file of ["dist/index.js", "dist/index.d.ts", "dist/internal.js", "package.json"]) expect(existsSync(join(sdk, file)), file).toBe(true);
    expect(existsSync(join(sdk, "src"))).toBe(false);
    expect(readdirSync(join(sdk, "dist")).some((f) => f.includes(".test."))).toBe(false);
  });
});

describe("with the CLI (svc-cli) as a dev dependency", () => {
  beforeAll(() => {
    // Both tarballs in one install: the CLI's dependency on svc is the packed SDK, not a registry package.
    writeProject({ svc: `file:${sdkTarball}` }, { "svc-cli": `file:${cliTarball}` });
    const started = performance.now();
    // Without install scripts: the one that matters, better-sqlite3's compile (no prebuilt binary can be fetched
    // here), takes minutes and tests nothing of svc's; its build for this Node is the repository's own, copied in
    // below (rebuilt when the versions differ). esbuild's binary comes as its optional platform package.
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], project, cleanEnv(), 600_000);
    reuseNativeBuild(project, "better-sqlite3");
    measured.cliInstallSeconds = ((performance.now() - started) / 1000).toFixed(1);
    measured.withCliBytes = String(sizeOf(join(project, "node_modules")));
    bin = join(project, "node_modules", "svc-cli", "bin", "svc.js");
  }, 660_000);

  it("uses the packed SDK for the CLI too: one svc in node_modules", () => {
    expect(JSON.parse(readFileSync(join(project, "node_modules", "svc", "package.json"), "utf8")).version).toBe(
      JSON.parse(readFileSync(join(REPO, "packages", "svc", "package.json"), "utf8")).version,
    );
    expect(existsSync(join(project, "node_modules", "svc-cli", "node_modules", "svc"))).toBe(false);
  });

  it("builds the project with `npx svc build`", () => {
    const out = run("npx", ["--no-install", "svc", "build", "--json"], project);
    const summary = JSON.parse(out) as { endpoints: Array<{ name: string }>; artifactPath: string };
    expect(summary.endpoints.map((e) => e.name)).toEqual(["hello"]);
    expect(existsSync(summary.artifactPath)).toBe(true);
  }, 120_000);

  it("runs a job under `svc dev`", async () => {
    const dev = spawn(process.execPath, [bin, "dev", "--json", "--port", "0", "--no-watch"], { cwd: project, env: cleanEnv() });
    children.push(dev);
    let stderr = "";
    dev.stderr.on("data", (d) => (stderr += d.toString()));
    try {
      const ready = await firstJsonOnStdout<{ apiKey: string; endpoints: Array<{ name: string; url: string }> }>(dev, "svc dev", 120_000, () => stderr);
      const hello = ready.endpoints.find((e) => e.name === "hello")!;
      const job = await runsync(hello.url, ready.apiKey, { who: "packed" });
      expect(job.status, JSON.stringify(job.body) + stderr).toBe(200);
      expect(job.body).toMatchObject({ status: "COMPLETED", output: { greeting: "hello, packed" } });
    } finally {
      await stop(dev, "SIGINT");
    }
  }, 180_000);

  it("deploys to a `svc server` of the installed CLI, and the deployed endpoint answers", async () => {
    const server = spawn(process.execPath, [bin, "server", "--port", "0", "--data-dir", join(work, "server-data"), "--workers", "process"], {
      cwd: work,
      env: cleanEnv({ SVC_API_KEY: KEY }),
    });
    children.push(server);
    let stderr = "";
    server.stderr.on("data", (d) => (stderr += d.toString()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`svc server did not start:\n${stderr}`)), 60_000);
        let out = "";
        server.stdout.on("data", (d) => {
          out += d.toString();
          const line = /^(http:\/\/\S+)\n/.exec(out);
          if (line) {
            clearTimeout(timer);
            resolve(line[1]!);
          }
        });
        server.once("exit", (code) => reject(new Error(`svc server exited ${code}:\n${stderr}`)));
      });
      const deployed = JSON.parse(
        run(process.execPath, [bin, "deploy", "--env", "prod", "--json"], project, cleanEnv({ SVC_API_URL: url, SVC_API_KEY: KEY })),
      ) as {
        endpoints: Array<{ name: string; url: string }>;
      };
      const hello = deployed.endpoints.find((e) => e.name === "hello")!;
      const job = await runsync(hello.url, KEY, { who: "deployed" });
      expect(job.status, JSON.stringify(job.body) + stderr).toBe(200);
      expect(job.body).toMatchObject({ status: "COMPLETED", output: { greeting: "hello, deployed" } });
    } finally {
      await stop(server, "SIGTERM");
    }
  }, 240_000);
});
