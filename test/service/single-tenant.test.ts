// `svc server` with process workers and no sandbox serves one user: keys for another user are refused (409), and
// a store that already holds keys of several users is refused at start, unless the operator says --single-tenant.
// With the sandbox (bubblewrap, where it works here) several users are served. The start line says which.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveSandbox } from "../../src/drivers/sandbox/index.js";
import { startServerProcess } from "../server-process.js";

const KEY = "svc_single_tenant_admin_key";
let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-single-tenant-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const sandboxHere = (() => {
  try {
    const s = resolveSandbox({ setting: "bwrap" });
    if (s.kind === "bwrap") s.dispose();
    return true;
  } catch {
    return false;
  }
})();

async function createKey(url: string, userId?: string) {
  const res = await fetch(`${url}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ scopes: ["jobs:*"], ...(userId ? { userId } : {}) }),
  });
  return { status: res.status, type: res.headers.get("content-type"), body: (await res.json()) as Record<string, unknown> };
}

describe("process workers without a sandbox", () => {
  it("serve one user: a key for another user is a 409 problem, the operator's own keys are made", async () => {
    const server = await startServerProcess({ dataDir: join(work, "one"), env: { SVC_API_KEY: KEY, SVC_SANDBOX: "none" } });
    try {
      expect(server.log()).toMatch(/workers: process, no sandbox: single tenant \(sandbox: none\); serving one user only/);
      const refused = await createKey(server.url, "bob");
      expect(refused.status).toBe(409);
      expect(refused.type).toMatch(/^application\/problem\+json/);
      expect(refused.body.detail).toMatch(/serves one user only \(process workers run without a sandbox\): no key is made for user bob/);
      expect((await createKey(server.url)).status).toBe(201);
    } finally {
      await server.stop();
    }
  }, 60_000);

  it("serve several users with --single-tenant; a start without it then refuses the store", async () => {
    const dataDir = join(work, "two");
    const trusted = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_SANDBOX: "none", SVC_SINGLE_TENANT: "on" } });
    try {
      expect(trusted.log()).toMatch(/--single-tenant: every user is trusted with every other's data/);
      expect((await createKey(trusted.url, "bob")).status).toBe(201);
    } finally {
      await trusted.stop();
    }
    await expect(startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_SANDBOX: "none" } })).rejects.toThrow(
      /holds keys of 2 users \(bob, default\), and process workers run without a sandbox/,
    );
    // Nothing of the data directory was lost by the refusal.
    expect(readFileSync(join(dataDir, "svc.sqlite")).length).toBeGreaterThan(0);
  }, 60_000);
});

describe.skipIf(!sandboxHere)("process workers in the sandbox", () => {
  it("serve several users, and the start line says how they are isolated", async () => {
    const server = await startServerProcess({ dataDir: join(work, "sandboxed"), env: { SVC_API_KEY: KEY } });
    try {
      // A network namespace too where pasta can connect one (docs/security.md).
      expect(server.log()).toMatch(/workers: process, sandbox bwrap \(user\/mount\/pid(\/network)? namespaces, seccomp, /);
      expect((await createKey(server.url, "bob")).status).toBe(201);
    } finally {
      await server.stop();
    }
  }, 60_000);
});
