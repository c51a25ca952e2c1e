// Ctrl-C during `svc deploy` through the `svc` binary: what it leaves is said on stderr, and the exit code is 130.
// A service that never answers holds the deploy at its first request, before any release began.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SVC_BIN } from "../cli-output.js";

let server: Server;
let project: string;
let asked!: () => void;
const firstRequest = new Promise<void>((done) => (asked = done));

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), "svc-interrupted-"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-app", type: "module" }));
  // Takes each request and never answers it.
  server = createServer(() => asked());
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
  rmSync(project, { recursive: true, force: true });
});

it("svc deploy stopped by SIGINT says where things stand and exits 130", async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
  const child = spawn(process.execPath, [SVC_BIN, "deploy", "--env", "prod"], {
    cwd: project,
    env: { ...env, SVC_API_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, SVC_API_KEY: "svc_test_interrupt_key" },
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  await firstRequest;
  child.kill("SIGINT");
  expect(await exited).toBe(130);
  expect(stderr).toContain("SIGINT: deploy stopped before its release began; no endpoint changed");
}, 60_000);
