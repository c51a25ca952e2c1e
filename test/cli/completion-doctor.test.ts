// `svc completion` scripts loaded by a real bash, and `svc doctor` against a real service and an engine address
// where nothing answers.

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExitCode } from "../../src/errors.js";
import { pathWithFailingCriu, runProgram, SVC_BIN } from "../cli-output.js";
import { manifest, resource, startTestService, type TestService } from "../service/helpers.js";
import { completionNames } from "../../src/cli/completion-names.js";
import { createServer as createTcpServer, type AddressInfo } from "node:net";

let t: TestService;
let config: string;
beforeAll(async () => {
  t = await startTestService();
  config = mkdtempSync(join(tmpdir(), "svc-doctor-config-"));
  for (const env of ["staging", "prod"]) {
    const resources = env === "prod" ? { chat: resource(), embed: resource() } : { chat: resource(), draft: resource() };
    await t.service.deploy({ app: "shop", env, manifest: manifest(resources, "shop"), artifactPath: t.artifact });
  }
});
afterAll(async () => {
  await t?.close();
  rmSync(config, { recursive: true, force: true });
});

function svc(args: string[], extra: Record<string, string> = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", ...(args[0] === "doctor" ? { PATH: pathWithFailingCriu() } : {}) };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI" || k === "DOCKER_HOST") delete env[k];
  return runProgram(process.execPath, [SVC_BIN, ...args], { cwd: config, env: { ...env, SVC_CONFIG_DIR: config, ...extra } });
}

/** What bash completes for the words typed so far (the last one possibly partial). */
function completionProbe(script: string, words: string[]): string {
  // The script calls back into svc: the built CLI, as a shell function.
  return `svc() { "${process.execPath}" "${SVC_BIN}" "$@"; }
${script}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}
_svc_completion
printf '%s\\n' "\${COMPREPLY[@]}"`;
}

function bashComplete(script: string, words: string[]): string[] {
  return execFileSync("bash", ["--norc", "-c", completionProbe(script, words)], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
}

/** The same, without blocking this process: the service the script's svc asks runs in it. */
async function bashCompleteLive(script: string, words: string[], env: NodeJS.ProcessEnv): Promise<string[]> {
  const r = await runProgram("bash", ["--norc", "-c", completionProbe(script, words)], { cwd: config, env });
  expect(r.stderr).toBe("");
  return r.stdout.split("\n").filter(Boolean);
}

describe("svc completion", () => {
  it("bash: loads, registers svc, and completes commands, subcommands and flags", async () => {
    const { code, stdout } = await svc(["completion", "bash"]);
    expect(code).toBe(0);
    expect(execFileSync("bash", ["--norc", "-c", `${stdout}\ncomplete -p svc`], { encoding: "utf8" })).toContain("-F _svc_completion svc");
    expect(bashComplete(stdout, ["svc", "dep"])).toEqual(["deploy"]);
    expect(bashComplete(stdout, ["svc", "jobs", ""])).toEqual(expect.arrayContaining(["list", "status", "cancel", "retry"]));
    // A positional argument between the command and the flag does not lose the command.
    expect(bashComplete(stdout, ["svc", "logs", "my-endpoint", "--fo"])).toEqual(["--follow"]);
    expect(bashComplete(stdout, ["svc", "volume", "create", "--s"])).toEqual(["--size"]);
  });

  it("zsh and fish scripts name every top-level command; an unknown shell is wrong usage", async () => {
    const fish = (await svc(["completion", "fish"])).stdout;
    expect(fish).toContain('complete -c svc -n "__fish_use_subcommand" -a "');
    expect(fish).toContain('complete -c svc -n "__fish_seen_subcommand_from jobs" -a "list status cancel retry"');
    expect((await svc(["completion", "zsh"])).stdout).toContain("bashcompinit");
    const bad = await svc(["completion", "powershell"]);
    expect(bad.code).toBe(ExitCode.usage);
    expect(bad.stderr).toContain('No completion for "powershell"');
  });
});

describe("completion of names from the context", () => {
  const target = (over: Record<string, string | undefined> = {}) => ({
    url: t.service.url,
    apiKey: t.key,
    app: "shop",
    source: "environment" as const,
    ...over,
  });

  it("endpoints of the environment named, or of every environment of the app; apps; the app's environments", async () => {
    expect(await completionNames("endpoint", target({ env: "prod" }), { cwd: config })).toEqual(["chat", "embed"]);
    expect(await completionNames("endpoint", target(), { cwd: config })).toEqual(["chat", "draft", "embed"]);
    expect(await completionNames("app", target(), { cwd: config })).toContain("shop");
    expect(await completionNames("env", target(), { cwd: config })).toEqual(["prod", "staging"]);
  });

  it("nothing, quickly and without an error, when no service answers, it hangs, or refuses the key", async () => {
    expect(await completionNames("endpoint", target({ url: "http://127.0.0.1:9" }), { cwd: config })).toEqual([]);
    const silent = createTcpServer(() => undefined).listen(0, "127.0.0.1");
    await new Promise((r) => silent.once("listening", r));
    try {
      const started = Date.now();
      expect(await completionNames("app", target({ url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}` }), { timeoutMs: 300 })).toEqual([]);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      silent.close();
    }
    expect(await completionNames("app", target({ apiKey: "svc_wrong" }), { cwd: config })).toEqual([]);
  });

  it("bash completes endpoint names after `svc run`, and apps and environments after --app and --env", async () => {
    const { stdout } = await svc(["completion", "bash"]);
    const env = { ...process.env, SVC_API_URL: t.service.url, SVC_API_KEY: t.key, SVC_APP: "shop", SVC_ENV: "prod", SVC_CONFIG_DIR: config };
    expect(await bashCompleteLive(stdout, ["svc", "run", "ch"], env)).toEqual(["chat"]);
    expect(await bashCompleteLive(stdout, ["svc", "jobs", "list", "e"], env)).toEqual(["embed"]);
    expect(await bashCompleteLive(stdout, ["svc", "logs", "--app", "sh"], env)).toEqual(["shop"]);
    expect(await bashCompleteLive(stdout, ["svc", "deploy", "--env", "st"], env)).toEqual(["staging"]);
    // Flags still complete where names do.
    expect(await bashCompleteLive(stdout, ["svc", "run", "--wa"], env)).toEqual(["--wait"]);
    // No service: nothing to complete, and no error text.
    expect(await bashCompleteLive(stdout, ["svc", "run", "ch"], { ...env, SVC_API_URL: "http://127.0.0.1:9" })).toEqual([]);
  });
});

describe("svc doctor", () => {
  it("says when no Docker engine answers, and how to fix it; a reachable service with a good key passes", async () => {
    const r = await svc(["doctor"], { DOCKER_HOST: `unix://${join(config, "no-engine.sock")}`, SVC_API_URL: t.service.url, SVC_API_KEY: t.key });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^warn docker\\s+No Docker engine answers at unix://${config}/no-engine.sock`, "m"));
    expect(r.stdout).toMatch(/^\s+fix: Start a Docker engine/m);
    expect(r.stdout).toMatch(new RegExp(`^ok {3}service\\s+${t.service.url} \\(SVC_API_URL / SVC_API_KEY\\) as user default, scopes admin`, "m"));
    expect(r.stdout).toMatch(/^(ok {3}|warn )node\s+Node v\d+/m);
  });

  it("fails (exit 1) on a key the service refuses and on a service that does not answer, with the fix", async () => {
    const refused = await svc(["doctor", "--json"], { SVC_API_URL: t.service.url, SVC_API_KEY: "svc_wrong" });
    expect(refused.code).toBe(ExitCode.user);
    const findings = JSON.parse(refused.stdout) as { ok: boolean; findings: Array<{ check: string; level: string; fix?: string }> };
    expect(findings.ok).toBe(false);
    expect(findings.findings.find((f) => f.check === "service")).toMatchObject({ level: "fail", fix: expect.stringContaining("svc login") });
    const down = await svc(["doctor"], { SVC_API_URL: "http://127.0.0.1:9", SVC_API_KEY: "k" });
    expect(down.code).toBe(ExitCode.user);
    expect(down.stdout).toMatch(/^FAIL service\s+http:\/\/127\.0\.0\.1:9 .*cannot be reached/m);
  });

  it("checks what a user needs; what only svc's own tests need (Chromium, PostgreSQL's binaries) only with --dev", async () => {
    const env = { SVC_API_URL: t.service.url, SVC_API_KEY: t.key };
    const user = await svc(["doctor", "--json"], env);
    const checks = (JSON.parse(user.stdout) as { findings: Array<{ check: string }> }).findings.map((f) => f.check);
    expect(checks).toEqual(expect.arrayContaining(["node", "docker", "service"]));
    expect(user.stdout).not.toMatch(/chromium|postgresql/i);
    const dev = await svc(["doctor", "--dev"], env);
    expect(dev.stdout).toMatch(/^(ok|info) +chromium\s/m);
    expect(dev.stdout).toMatch(/^(ok|info) +postgresql\s/m);
    expect(dev.code).toBe(user.code);
  });
});
