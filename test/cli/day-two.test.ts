// Day-two commands through the `svc` binary (or its entry point in the test's process) against real services with
// real process workers: who a key acts as (`svc whoami`), profiles (`svc login/logout`, --profile, SVC_PROFILE, the
// environment winning), and calling endpoints from the terminal (`svc run`, `svc jobs`).

import { mkdirSync, mkdtempSync, rmSync, statSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { ExitCode } from "../../src/errors.js";
import { startService, type DeployedEndpoint, type Service } from "../../src/service/index.js";
import { pathWithFailingCriu, runCliInProcess, runProgram, SVC_BIN } from "../cli-output.js";
import { runInPty } from "../pty.js";
import { buildTestArtifact, FIXTURE_ENDPOINTS } from "../runtime/artifact.js";

const KEY = "svc_test_daytwo_key_0123456789";
const OTHER_KEY = "svc_test_daytwo_other_key_98765";

let work: string;
let config: string;
let service: Service;
let other: Service;
let driver: WorkerDriver;
let fns: DeployedEndpoint;

/** A clean environment for the CLI: no SVC_* or CI from this process, profiles in the test's config dir. */
function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
  return { ...env, SVC_CONFIG_DIR: config, ...extra };
}
/** The `svc` binary (node bin/svc.js), `input` on its standard input. */
function svcBinary(args: string[], extra: Record<string, string> = {}, input?: string) {
  return runProgram(process.execPath, [SVC_BIN, ...args], { cwd: work, env: cliEnv(extra), input });
}
/**
 * A command's output and exit code: through the CLI's entry point in this process, or the binary when it reads
 * standard input.
 */
function svc(args: string[], extra: Record<string, string> = {}, input?: string) {
  return input === undefined ? runCliInProcess(args, { cwd: work, env: cliEnv(extra) }) : svcBinary(args, extra, input);
}
const asAdmin = {
  get SVC_API_URL() {
    return service.url;
  },
  SVC_API_KEY: KEY,
};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "svc-daytwo-"));
  config = mkdtempSync(join(tmpdir(), "svc-daytwo-config-"));
  const fnsDef = FIXTURE_ENDPOINTS.find((e) => e.name === "fns")!;
  const artifact = await buildTestArtifact(
    join(work, "artifact.tar.gz"),
    { fns: { workersMin: 1, workersMax: 1, functions: fnsDef.functions.map((f) => ({ name: f.name, module: f.module, export: f.exportName, kind: f.kind })) } },
    undefined,
    [fnsDef],
  );
  driver = createProcessDriver({ cacheDir: join(work, "cache"), closeGraceMs: 1000 });
  service = await startService({ dataDir: join(work, "data"), driver, apiKeys: [KEY], leaseMs: 2000 });
  other = await startService({ dataDir: join(work, "other"), apiKeys: [OTHER_KEY] });
  [fns] = await service.deploy({ app: "daytwo", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
}, 120_000);

afterAll(async () => {
  await service?.close();
  await other?.close();
  await driver?.close();
  await rm(work, { recursive: true, force: true });
  rmSync(config, { recursive: true, force: true });
});

describe("svc whoami", () => {
  it("names the service, the user, the key and its scopes", async () => {
    const admin = await svcBinary(["whoami", "--json"], { SVC_API_URL: service.url, SVC_API_KEY: KEY });
    expect(admin.code).toBe(0);
    expect(JSON.parse(admin.stdout)).toMatchObject({
      url: service.url,
      via: "SVC_API_URL / SVC_API_KEY",
      userId: "default",
      scopes: ["admin"],
      key: { inUse: true, scopes: ["admin"] },
    });

    const created = JSON.parse((await svc(["keys", "create", "--scope", "jobs:*", "--name", "runner", "--expires-in", "30d", "--json"], asAdmin)).stdout);
    const jobsOnly = await svc(["whoami"], { SVC_API_URL: service.url, SVC_API_KEY: created.key });
    expect(jobsOnly.code).toBe(0);
    expect(jobsOnly.stdout).toMatch(new RegExp(`^key\\s+${created.id} \\(runner\\)$`, "m"));
    expect(jobsOnly.stdout).toMatch(/^scopes\s+jobs:\*$/m);
    expect(jobsOnly.stdout).toMatch(/^expires\s+20\d\d-/m);
    expect(jobsOnly.stdout).toMatch(/^rate limits\s+\d+\/minute/m);

    const reader = JSON.parse((await svc(["keys", "create", "--scope", "management:read", "--json"], asAdmin)).stdout);
    const readOnly = JSON.parse((await svc(["whoami", "--json"], { SVC_API_URL: service.url, SVC_API_KEY: reader.key })).stdout);
    expect(readOnly).toMatchObject({ userId: "default", keyId: reader.id, scopes: ["management:read"], key: { id: reader.id, inUse: true } });

    const refused = await svc(["whoami"], { SVC_API_URL: service.url, SVC_API_KEY: "svc_not_a_key" });
    expect(refused.code).toBe(ExitCode.api);
    expect(refused.stderr).toContain("401 Unauthorized");
  });
});

describe("profiles", () => {
  it("stores a checked key per profile (0600), picks one by --profile or SVC_PROFILE, and lets the environment win", async () => {
    const bad = await svc(["login", "--url", service.url], {}, "svc_wrong_key\n");
    expect(bad.code).toBe(ExitCode.user);
    expect(bad.stderr).toContain("did not accept the key: nothing was stored");
    expect(existsSync(join(config, "profiles.json"))).toBe(false);
    // Nothing answering is not a refused key: said as what it is, with the exit code of an unreachable service.
    const nobody = await svc(["login", "--url", "http://127.0.0.1:1", "--json"], {}, `${KEY}\n`);
    expect(nobody.code).toBe(ExitCode.unreachable);
    expect(JSON.parse(nobody.stderr).error.message).toMatch(/^Cannot reach the svc service at http:\/\/127\.0\.0\.1:1 \(--url\): /);
    expect(existsSync(join(config, "profiles.json"))).toBe(false);

    const login = await svc(["login", "--url", service.url], {}, `${KEY}\n`);
    expect(login.code).toBe(0);
    expect(login.stdout).toContain(`Logged in to ${service.url} as user default`);
    expect(login.stdout).toContain('profile "default"');
    const file = join(config, "profiles.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8")).toContain(KEY);

    const staging = await svc(["--profile", "staging", "login", "--url", other.url, "--json"], {}, OTHER_KEY);
    expect(staging.code).toBe(0);
    expect(JSON.parse(staging.stdout)).toMatchObject({ profile: "staging", current: false, url: other.url });

    // No environment: the current profile; --profile or SVC_PROFILE: the named one.
    const who = async (args: string[], extra: Record<string, string> = {}, run = svc) =>
      JSON.parse((await run([...args, "whoami", "--json"], extra)).stdout) as { url: string; via: string };
    expect(await who([])).toMatchObject({ url: service.url, via: 'profile "default"' });
    // A .env copied from a template's .env.example and not filled in yet: an empty setting is no setting.
    writeFileSync(join(work, ".env"), "SVC_API_URL=\nSVC_API_KEY=\n");
    try {
      // The binary: a process reads a directory's .env once.
      expect(await who([], {}, svcBinary)).toMatchObject({ url: service.url, via: 'profile "default"' });
    } finally {
      rmSync(join(work, ".env"));
    }
    expect(await who(["--profile", "staging"])).toMatchObject({ url: other.url, via: 'profile "staging"' });
    expect(await who([], { SVC_PROFILE: "staging" })).toMatchObject({ url: other.url });
    // The environment wins, for CI.
    expect(await who(["--profile", "staging"], { SVC_API_URL: service.url, SVC_API_KEY: KEY })).toMatchObject({
      url: service.url,
      via: "SVC_API_URL / SVC_API_KEY",
    });
    // A command through a profile: the management API of the staging service.
    const volumes = await svc(["--profile", "staging", "volume", "list", "--json"]);
    expect(volumes.code).toBe(0);

    const typo = await svc(["--profile", "stagign", "whoami"]);
    expect(typo.code).toBe(ExitCode.user);
    expect(typo.stderr).toContain('No profile "stagign"');
    expect(typo.stderr).toContain("known profiles: default, staging");

    const out = await svc(["logout"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('Removed profile "default"; commands now use profile "staging"');
    expect(await who([])).toMatchObject({ url: other.url });
    expect(readFileSync(file, "utf8")).not.toContain(KEY);
  });
});

describe("svc run and svc jobs", () => {
  const target = () => ({ SVC_API_URL: service.url, SVC_API_KEY: KEY });

  it("prints a function's output (exit 0), streams a generator's chunks, and fails with the job's error (exit 1)", async () => {
    const plain = await svc(["run", fns.id, '{"a": 2, "b": 40}', "--function", "add"], target());
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout)).toMatchObject({ sum: 42 });
    expect(plain.stderr).toMatch(/^job [a-z0-9-]+ on /m);

    // By name in the app and environment, as a user of a deployed app names it.
    const byName = await svc(["run", "fns", '{"a": 1, "b": 2}', "--function", "add", "--app", "daytwo", "--env", "test"], target());
    expect(byName.code, byName.stderr).toBe(0);
    expect(JSON.parse(byName.stdout)).toMatchObject({ sum: 3 });

    const text = await svc(["run", fns.id, "-", "--function", "upper"], target(), '{"text": "shout"}');
    expect(text.stdout).toBe("SHOUT\n");

    const streamed = await svc(["run", fns.id, '{"count": 3, "delayMs": 50}', "--function", "count"], target());
    expect(streamed.code).toBe(0);
    const lines = streamed.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { i: number });
    expect(lines.map((l) => l.i)).toEqual([0, 1, 2]);

    const failed = await svc(["run", fns.id, '{"message": "out of range"}', "--function", "fail"], target());
    expect(failed.code).toBe(ExitCode.user);
    expect(failed.stdout).toBe("");
    expect(failed.stderr).toMatch(/job \S+ FAILED: .*out of range/);

    const notJson = await svc(["run", fns.id, "{a: 1}"], target());
    expect(notJson.code).toBe(ExitCode.usage);
    expect(notJson.stderr).toContain("The input in the input argument is not JSON");
  });

  it("--async prints the job id; jobs status, list, cancel and retry act on it", async () => {
    const submitted = await svc(["run", fns.id, '{"ms": 30000}', "--function", "nap", "--async"], target());
    expect(submitted.code).toBe(0);
    const id = submitted.stdout.trim();
    expect(id).toMatch(/^[a-z0-9-]+$/);
    const listed = await svc(["jobs", "list", fns.id], target());
    // Headers in words, the time relative (exact under --json).
    expect(listed.stdout).toMatch(/^ID\s+STATUS\s+FUNCTION\s+CREATED\s+DELAY\s+EXECUTION\s+ERROR$/m);
    expect(listed.stdout).toMatch(new RegExp(`^${id}\\s+(IN_QUEUE|IN_PROGRESS)\\s+nap\\s+(just now|\\d+s ago)\\s`, "m"));
    const cancelled = await svc(["jobs", "cancel", fns.id, id, "--json"], target());
    expect(JSON.parse(cancelled.stdout)).toEqual({ id, status: "CANCELLED" });
    const status = await svc(["jobs", "status", fns.id, id], target());
    expect(status.stdout).toContain(`${id} CANCELLED`);
    // Only FAILED and TIMED_OUT jobs run again (the job API's rule), said as the service says it.
    const notRetried = await svc(["jobs", "retry", fns.id, id], target());
    expect(notRetried.code).toBe(ExitCode.api);
    expect(notRetried.stderr).toContain("only FAILED and TIMED_OUT jobs can be retried");
    const failed = JSON.parse((await svc(["run", fns.id, '{"message": "again"}', "--function", "fail", "--json"], target())).stdout) as { id: string };
    const retried = await svc(["jobs", "retry", fns.id, failed.id, "--json"], target());
    expect(JSON.parse(retried.stdout)).toEqual({ id: failed.id, status: "IN_QUEUE" });
    const missing = await svc(["jobs", "status", fns.id, "nope"], target());
    expect(missing.code).toBe(ExitCode.api);
    expect(missing.stderr).toContain("404 Not Found");
  });
});

describe("mistaken names", () => {
  const target = () => ({ SVC_API_URL: service.url, SVC_API_KEY: KEY });

  it("an unknown environment lists the app's environments; a mistyped endpoint or option gets the one meant", async () => {
    const wrongEnv = await svc(["run", "fns", "{}", "--function", "add", "--app", "daytwo", "--env", "tset"], target());
    expect(wrongEnv.code).toBe(ExitCode.user);
    expect(wrongEnv.stderr).toContain('No environment "tset" in daytwo (it has: test)');

    // Inside the project (the app from package.json), as `svc logs <endpoint> --env <name>` is run there.
    const project = join(work, "project-daytwo");
    mkdirSync(project, { recursive: true });
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "daytwo" }));
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
    for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
    const inProject = await runProgram(process.execPath, [SVC_BIN, "logs", "fns", "--env", "prd"], {
      cwd: project,
      env: { ...env, SVC_CONFIG_DIR: config, ...target() },
    });
    expect(inProject.code).toBe(ExitCode.user);
    expect(inProject.stderr).toContain('No environment "prd" in daytwo (it has: test)');
    expect(inProject.stderr).not.toContain("Cannot tell which app");

    const typo = await svc(["run", "fsn", "{}", "--app", "daytwo", "--env", "test"], target());
    expect(typo.code).toBe(ExitCode.user);
    expect(typo.stderr).toContain('No endpoint "fsn" in app "daytwo", environment "test"; did you mean "fns"?');

    const option = await svc(["volume", "list", "--jsno"], target());
    expect(option.code).toBe(ExitCode.usage);
    expect(option.stderr).toContain("(Did you mean --json?)");
  });
});

describe("human times and terminal output", () => {
  it("svc logs --since takes a duration or an ISO time", async () => {
    const target = { SVC_API_URL: service.url, SVC_API_KEY: KEY };
    expect((await svc(["run", fns.id, '{"words": ["since-check"]}', "--function", "say"], target)).code).toBe(0);
    const recent = await svc(["logs", fns.id, "--since", "10m"], target);
    expect(recent.stdout).toContain("since-check");
    const future = await svc(["logs", fns.id, "--since", "2999-01-01T00:00:00Z"], target);
    expect(future.stdout).toBe("");
    const bad = await svc(["logs", fns.id, "--since", "yesterday"], target);
    expect(bad.code).toBe(ExitCode.usage);
    expect(bad.stderr).toContain("--since must be a duration back from now (10m, 2h, 1d)");
  });

  it("svc doctor marks findings with symbols and colour on a terminal, words when piped", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_URL: service.url, SVC_API_KEY: KEY, SVC_CONFIG_DIR: config, PATH: pathWithFailingCriu() };
    delete env.NO_COLOR;
    delete env.CI;
    const tty = await runInPty([process.execPath, SVC_BIN, "doctor"], env);
    expect(tty.output).toMatch(/\u001b\[32m✔\u001b\[39m service /);
    const piped = await svc(["doctor"], { SVC_API_URL: service.url, SVC_API_KEY: KEY, PATH: pathWithFailingCriu() });
    expect(piped.stdout).toMatch(/^ok {3}service /m);
    expect(piped.stdout).not.toContain("\u001b[");
  });
});

describe("secrets typed at a terminal", () => {
  it("svc login and svc secret set ask on the terminal without echoing what is typed", async () => {
    const configDir = mkdtempSync(join(tmpdir(), "svc-pty-config-"));
    onTestFinished(() => rmSync(configDir, { recursive: true, force: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, SVC_CONFIG_DIR: configDir };
    for (const k of Object.keys(env)) if ((k.startsWith("SVC_") && k !== "SVC_CONFIG_DIR") || k === "CI") delete env[k];
    const login = await runInPty([process.execPath, SVC_BIN, "login", "--url", service.url], env, [{ expect: "API key for .*: ", send: `${KEY}\r` }]);
    expect(login.code).toBe(0);
    expect(login.output).toContain(`API key for ${service.url}: `);
    expect(login.output).toContain("Logged in to");
    expect(login.output).not.toContain(KEY);
    // Where no service answers, it says so before it asks for a key.
    const nowhere = await runInPty([process.execPath, SVC_BIN, "login"], { ...env, SVC_API_URL: "http://127.0.0.1:1" }, []);
    expect(nowhere.code).toBe(ExitCode.unreachable);
    expect(nowhere.output).toContain("Cannot reach the svc service at http://127.0.0.1:1 (SVC_API_URL)");
    expect(nowhere.output).toContain("svc login --url");
    expect(nowhere.output).not.toContain("API key for");

    const set = await runInPty([process.execPath, SVC_BIN, "secret", "set", "PTY_TOKEN"], env, [
      { expect: "Value of PTY_TOKEN .*: ", send: "typed-secret-value\r" },
    ]);
    expect(set.code).toBe(0);
    expect(set.output).toContain("Set secret PTY_TOKEN for all apps");
    expect(set.output).not.toContain("typed-secret-value");

    // Ctrl-C at the prompt cancels: nothing is stored.
    const cancelled = await runInPty([process.execPath, SVC_BIN, "secret", "set", "NEVER_SET"], env, [
      { expect: "Value of NEVER_SET .*: ", send: "abc\u0003" },
    ]);
    expect(cancelled.code).toBe(ExitCode.usage);
    expect(cancelled.output).toContain("Cancelled; nothing was changed");
    const listed = await svc(["secret", "list", "--json"], { SVC_API_URL: service.url, SVC_API_KEY: KEY });
    expect(JSON.parse(listed.stdout).map((s: { name: string }) => s.name)).toEqual(["PTY_TOKEN"]);
  });
});
