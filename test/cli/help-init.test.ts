// What a new user reads first, through the `svc` binary: `svc --help` in groups (start, build and deploy, operate,
// manage), and `svc init`'s next steps by real paths.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { SVC_VERSION } from "../../src/version.js";
import { runProgram, SVC_BIN } from "../cli-output.js";

const work = mkdtempSync(join(tmpdir(), "svc-help-init-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const repo = join(SVC_BIN, "..", "..");

const svc = (args: string[]) => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
  return runProgram(process.execPath, [SVC_BIN, ...args], { cwd: work, env });
};

it("svc --help groups the commands: start, build and deploy, operate, manage", async () => {
  const help = await svc(["--help"]);
  expect(help.code).toBe(0);
  const at = (line: RegExp) => help.stdout.search(line);
  const order = [/^Start:$/m, /^  init /m, /^Build and deploy:$/m, /^  deploy /m, /^Operate:$/m, /^  run /m, /^Manage:$/m, /^  volume /m].map(at);
  expect(order.every((i) => i >= 0)).toBe(true);
  expect([...order].sort((a, b) => a - b)).toEqual(order);
});

it("svc init prints the install step by the real path of svc's checkout", async () => {
  const init = await svc(["init", "app"]);
  expect(init.code, init.stderr).toBe(0);
  expect(init.stdout).toContain(`npm install ${join(repo, `svc-${SVC_VERSION}.tgz`)} ${join(repo, `svc-cli-${SVC_VERSION}.tgz`)}`);
  expect(init.stdout).toContain(`\`cd ${repo} && npm pack -w svc && npm pack\``);
  expect(init.stdout).not.toContain("<svc checkout>");
});
