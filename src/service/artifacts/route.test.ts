import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { handleRequest, type ApiContext } from "../api.js";
import { postgresArtifacts } from "./store.js";
import type { Queryable } from "../store/queryable.js";

const bytes = Buffer.from("an artifact");
const sha = createHash("sha256").update(bytes).digest("hex");

let server: Server | undefined;
let work: string | undefined;
afterEach(async () => {
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
  if (work) rmSync(work, { recursive: true, force: true });
  work = undefined;
});

/**
 * A worker's download of its artifact from a replica that lacks it on disk and reads it from the shared database
 * (`db`): the status, content type and body it gets, and what the service logged.
 */
async function download(db: Queryable): Promise<{ status: number; type: string | null; body: string; logged: string[] }> {
  work = mkdtempSync(join(tmpdir(), "svc-artifact-route-"));
  const logged: string[] = [];
  const ctx = {
    keyring: { authenticate: async () => ({ keyId: "k", userId: "u", scopes: [], worker: { workerId: "w1", endpointId: "e1" } }) },
    endpoints: new Map([["e1", { id: "e1", artifactPath: join(work, "elsewhere", `${sha}.tar.gz`) }]]),
    artifacts: postgresArtifacts({ dataDir: work, db, transaction: (body) => body(db) }),
    log: (m: string) => logged.push(m),
  } as unknown as ApiContext;
  server = createServer((req, res) => {
    handleRequest(ctx, req, res).catch((err: unknown) => {
      // As the service answers what the dispatcher throws (index.ts).
      logged.push(String(err));
      res.writeHead(500, { "content-type": "text/plain" }).end("The service failed to handle this request");
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  const res = await fetch(`http://127.0.0.1:${port}/_worker/v1/artifacts/${sha}`, { headers: { authorization: "Bearer t" } });
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text(), logged };
}

const failing = (code: string, message: string): Queryable => ({
  query: () => Promise.reject(Object.assign(new Error(message), { code })),
});

describe("GET /_worker/v1/artifacts/{sha256} when the artifact must come from the database", () => {
  it("sends the artifact the database holds", async () => {
    const db: Queryable = {
      query: (text: string) =>
        Promise.resolve({ rows: text.includes("FROM svc_artifacts ") ? [{ size: bytes.length, parts: 1 }] : [{ data: bytes }] } as never),
    };
    const got = await download(db);
    expect(got.status).toBe(200);
    expect(got.body).toBe("an artifact");
  });

  it("is a 404 only when the database does not have it either", async () => {
    const got = await download({ query: () => Promise.resolve({ rows: [] } as never) });
    expect(got.status).toBe(404);
    expect(JSON.parse(got.body).detail).toMatch(/is not on this service/);
  });

  it("is a 503 problem naming the store when the database does not answer", async () => {
    const got = await download(failing("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5432"));
    expect(got.status).toBe(503);
    expect(got.type).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(got.body).detail).toMatch(/storage is unavailable/);
  });

  it("says a refused read is refused (a 500 naming it, logged), not absent", async () => {
    const got = await download(failing("42501", "permission denied for table svc_artifacts"));
    expect(got.status).toBe(500);
    expect(got.type).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(got.body).detail).toMatch(/could not be read: permission denied for table svc_artifacts/);
    expect(got.logged.join("\n")).toMatch(/could not read artifact .* for worker w1: permission denied/);
  });

  it("refuses bytes that fail their sha256 as such, not as absent", async () => {
    const db: Queryable = {
      query: (text: string) =>
        Promise.resolve({ rows: text.includes("FROM svc_artifacts ") ? [{ size: 7, parts: 1 }] : [{ data: Buffer.from("altered") }] } as never),
    };
    const got = await download(db);
    expect(got.status).toBe(500);
    expect(JSON.parse(got.body).detail).toMatch(/read from the database has sha256 [0-9a-f]{64}: refused/);
  });
});
