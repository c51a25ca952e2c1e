// Printed commands work as pasted after `svc login` too: nothing set SVC_API_KEY in the user's shell, so the
// "Try it" curl of `svc deploy` gets the key from `svc whoami --key` (the profile's), and run through a shell it
// gets 200.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { startService, type Service } from "../../src/service/index.js";
import { runProgram, SVC_BIN } from "../cli-output.js";
import { REPO } from "../lb/harness.js";

const KEY = "svc_test_login_curl_key_0123456789";
let work: string;
let project: string;
let bin: string;
let service: Service;
let driver: WorkerDriver;

/** A user's shell: no SVC_* variables, `svc` on PATH, profiles in the test's config dir. */
function shellEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", SVC_CONFIG_DIR: join(work, "config"), PATH: `${bin}:${process.env.PATH}` };
  for (const k of Object.keys(env)) if ((k.startsWith("SVC_") && k !== "SVC_CONFIG_DIR") || k === "CI") delete env[k];
  return env;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-login-curl-"));
  bin = join(work, "bin");
  mkdirSync(bin);
  symlinkSync(SVC_BIN, join(bin, "svc"));
  project = join(work, "hello");
  mkdirSync(join(project, "src"), { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(REPO, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "hello", type: "module", private: true }));
  writeFileSync(
    join(project, "src", "hello.mjs"),
    'import { Endpoint } from "svc";\nexport const hello = Endpoint({ name: "hello", workers: [0, 1] })(async function hello() { return "hi"; });\n',
  );
  driver = createProcessDriver({ cacheDir: join(work, "cache"), closeGraceMs: 1000 });
  service = await startService({ dataDir: join(work, "data"), driver, apiKeys: [KEY] });
}, 60_000);

afterAll(async () => {
  await service?.close();
  await driver?.close();
  rmSync(work, { recursive: true, force: true });
});

it("after svc login, svc deploy's printed curl gets 200 when pasted into a shell", async () => {
  const login = await runProgram(process.execPath, [SVC_BIN, "login", "--url", service.url], { cwd: project, env: shellEnv(), input: `${KEY}\n` });
  expect(login.code, login.stderr).toBe(0);
  const deployed = await runProgram(process.execPath, [SVC_BIN, "deploy", "--env", "prod", "--yes"], { cwd: project, env: shellEnv() });
  expect(deployed.code, deployed.stderr).toBe(0);
  const text = deployed.stdout + deployed.stderr;
  const curl = /Try it:\n\s+(curl .*)/.exec(text)?.[1];
  expect(curl, text).toBeDefined();
  expect(curl).not.toContain(KEY);
  expect(curl).toContain("$(svc whoami --key)");
  const pasted = await promisify(execFile)("sh", ["-c", `${curl} -w ' %{http_code}'`], { cwd: project, env: shellEnv(), timeout: 60_000 });
  expect(pasted.stdout).toMatch(/"status":"COMPLETED".* 200$/);
}, 120_000);
