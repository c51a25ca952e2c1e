// Secrets end to end through the `svc` binary against a spawned `svc server` with process workers: a deploy that
// names a secret not set fails before activation, naming it; `svc secret set` (value on stdin) then deploy: the
// worker has it; the value is nowhere in the artifact, the manifest, the logs, job records or API answers, nor in
// the database file in the clear; changing it rolls the workers; deleting it is said; rotation of the server's
// key seals the rows again.

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "secrets-e2e-admin-key";
const TOKEN = "hf_TopSecretValue_1234567890";
const ROTATED = "hf_RotatedValue_0987654321";
const KEY_A = Buffer.alloc(32, 1).toString("base64");
const KEY_B = Buffer.alloc(32, 2).toString("base64");

let work: string;
let project: string;
let dataDir: string;
let server: ServerProcess | undefined;
let url: string;

async function startServer(env: Record<string, string>): Promise<string> {
  server = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, ...env } });
  return server.url;
}

async function stopServer(): Promise<void> {
  await server?.stop();
}

function svc(args: string[], input?: string) {
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  const r = spawnSync(process.execPath, [bin, ...args], {
    cwd: project,
    env: { ...base, SVC_API_URL: url, SVC_API_KEY: KEY },
    input,
    encoding: "utf8",
    timeout: 120_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${path.startsWith("http") ? "" : url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, body: (text ? JSON.parse(text) : undefined) as any };
}

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-secrets-e2e-"));
  project = join(work, "secrets-app");
  dataDir = join(work, "data");
  cpSync(join(repo, "fixtures", "secrets-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  url = await startServer({ SVC_SECRETS_KEY: KEY_A });
}, 60_000);

afterAll(async () => {
  await stopServer();
  rmSync(work, { recursive: true, force: true });
});

it("refuses a release whose secret is not set, gives the worker the value once set, and keeps it out of everything else", async () => {
  const refused = svc(["deploy", "--env", "prod", "--json"]);
  expect(refused.status).toBe(3);
  expect(refused.stderr).toContain("422");
  // Under --json the error is one JSON line on stderr (docs/cli.md).
  const refusal = JSON.parse(refused.stderr.split("\n").find((l) => l.startsWith('{"error"'))!).error as { problems: string[] };
  expect(refusal.problems.join("\n")).toContain('endpoint "vault" needs secret HF_TOKEN, which is not set: `svc secret set HF_TOKEN`');
  const env = await api("GET", "/v1/apps/secrets-app/environments/prod");
  expect(env.body.endpoints ?? []).toEqual([]);

  // The value comes on stdin, never as an argument.
  const set = svc(["secret", "set", "HF_TOKEN", "--json"], `${TOKEN}\n`);
  expect(set.status).toBe(0);
  expect(JSON.parse(set.stdout)).toMatchObject({ name: "HF_TOKEN", app: null, env: null, created: true });
  expect(set.stdout).not.toContain(TOKEN);
  const listed = svc(["secret", "list"]);
  expect(listed.stdout).toMatch(/^HF_TOKEN\s+\(all\)/m);
  expect(listed.stdout).not.toContain(TOKEN);

  const deployed = svc(["deploy", "--env", "prod", "--json"]);
  expect(deployed.status, deployed.stderr).toBe(0);
  const vault = JSON.parse(deployed.stdout).endpoints.find((e: { name: string }) => e.name === "vault");
  const first = await api("POST", `${vault.url}/runsync`, { input: {} });
  expect(first.body).toMatchObject({ status: "COMPLETED", output: { sha256: sha(TOKEN), length: TOKEN.length, greeting: "hi" } });

  // Nowhere else: artifact and manifest, logs, job records, API answers, the database file in the clear.
  const artifact = gunzipSync(readFileSync(join(project, ".svc", "artifact.tar.gz"))).toString("latin1");
  expect(artifact).toContain("HF_TOKEN");
  expect(artifact).not.toContain(TOKEN);
  expect(readFileSync(join(project, ".svc", "svc_manifest.json"), "utf8")).toContain('"secrets": [\n        "HF_TOKEN"\n      ]');
  const logs = await api("GET", `/v1/endpoints/${vault.id}/logs`);
  expect(logs.text).toContain(`token length ${TOKEN.length}`);
  expect(logs.text).not.toContain(TOKEN);
  expect((await api("GET", `${vault.url}/status/${first.body.id}`)).text).not.toContain(TOKEN);
  expect((await api("GET", `${vault.url}/jobs`)).text).not.toContain(TOKEN);
  expect((await api("GET", "/v1/secrets")).text).not.toContain(TOKEN);
  expect((await api("GET", `/v1/endpoints/${vault.id}`)).text).not.toContain(TOKEN);
  for (const file of ["svc.sqlite", "svc.sqlite-wal"]) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(dataDir, file));
    } catch {
      continue;
    }
    expect(bytes.includes(Buffer.from(TOKEN))).toBe(false);
  }
  expect(server!.log()).not.toContain(TOKEN);

  // A new value rolls the workers: the next job runs on a new worker that has it.
  const changed = svc(["secret", "set", "HF_TOKEN"], ROTATED);
  expect(changed.status).toBe(0);
  expect(changed.stdout).toContain("Changed secret HF_TOKEN for all apps; workers roll on secrets-app/prod/vault");
  const deadline = Date.now() + 30_000;
  let after = first;
  while (Date.now() < deadline) {
    after = await api("POST", `${vault.url}/runsync`, { input: {} });
    if (after.body.output?.sha256 === sha(ROTATED)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(after.body.output).toMatchObject({ sha256: sha(ROTATED), length: ROTATED.length });
  expect(after.body.output.worker).not.toBe(first.body.output.worker);

  // A more specific secret wins for its app and environment.
  expect(svc(["secret", "set", "HF_TOKEN", "--app", "secrets-app", "--env", "prod"], "env-specific").status).toBe(0);
  const deadline2 = Date.now() + 30_000;
  let specific = after;
  while (Date.now() < deadline2 && specific.body.output?.sha256 !== sha("env-specific")) {
    specific = await api("POST", `${vault.url}/runsync`, { input: {} });
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(specific.body.output.sha256).toBe(sha("env-specific"));

  const noValue = svc(["secret", "set", "EMPTY_ONE"], "");
  expect(noValue.status).toBe(2);
  expect(noValue.stderr).toContain("empty");
  const badName = await api("PUT", "/v1/secrets/SVC_API_KEY", { value: "x" });
  expect(badName.status).toBe(422);
  const unknownMember = await api("PUT", "/v1/secrets/OTHER", { value: "x", scope: "all" });
  expect(unknownMember.status).toBe(422);
  expect(unknownMember.body.errors).toContain("$.scope: unknown property");

  const deleted = svc(["secret", "delete", "HF_TOKEN", "--app", "secrets-app", "--env", "prod", "--yes"]);
  expect(deleted.stdout).toContain('Deleted secret HF_TOKEN for app "secrets-app", environment "prod"; workers roll on secrets-app/prod/vault');
  expect(svc(["secret", "delete", "HF_TOKEN", "--app", "secrets-app", "--env", "prod", "--yes"]).status).toBe(3);
}, 180_000);

it("after a key rotation (new current key, the old one as previous) values are sealed again and still reach the workers", async () => {
  await stopServer();
  url = await startServer({ SVC_SECRETS_KEY: KEY_B, SVC_SECRETS_KEY_PREVIOUS: KEY_A });
  expect(server!.log()).toMatch(/sealed 1 secret\(s\) again under the current secrets key/);
  await stopServer();
  // The old key is no longer needed (a new process: a new log).
  url = await startServer({ SVC_SECRETS_KEY: KEY_B });
  expect(server!.log()).not.toContain("cannot be opened");
  const env = await api("GET", "/v1/apps/secrets-app/environments/prod");
  const vault = env.body.endpoints.find((e: { name: string }) => e.name === "vault");
  const r = await api("POST", `${vault.url}/runsync`, { input: {} });
  expect(r.body.output).toMatchObject({ sha256: sha(ROTATED) });
}, 120_000);
