import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { JobsRole } from "./jobs-role.js";
import { handleRequest, type ApiContext } from "../api.js";
import type { Queryable } from "../store/queryable.js";

/** A database that answers nothing: every query fails as a refused connection does. */
const unreachable: Queryable = {
  query: () => Promise.reject(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })),
};

/** A database where another replica (at `address`) holds the jobs lease. */
function heldElsewhere(address: string | null): Queryable {
  return {
    query: (text: string) =>
      Promise.resolve({
        rows: text.startsWith("INSERT") ? [] : [{ holder: "other", address, adopting: null }],
      } as never),
  };
}

function role(db: Queryable, lines: string[] = []): JobsRole {
  return new JobsRole({ db, holder: "this", address: "http://127.0.0.1:1", log: (m) => lines.push(m) });
}

let server: Server | undefined;
let started: JobsRole | undefined;
afterEach(async () => {
  await started?.stop();
  started = undefined;
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

/** The service's dispatcher on a replica whose job traffic goes where `jobs` says; the status and body a caller gets. */
async function jobCall(jobs: JobsRole): Promise<{ status: number; type: string | null; body: Record<string, unknown> }> {
  const ctx = {
    keyring: { authenticate: async () => ({ keyId: "k", userId: "u", scopes: ["admin"] }) },
    jobsServedBy: () => jobs.servedBy,
    endpoints: new Map(),
  } as unknown as ApiContext;
  server = createServer((req, res) => {
    handleRequest(ctx, req, res).catch((err: unknown) => {
      // As the service answers what the dispatcher throws (index.ts).
      res.writeHead(500, { "content-type": "text/plain" }).end(String(err));
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  const res = await fetch(`http://127.0.0.1:${port}/v2/e1/runsync`, { method: "POST", headers: { authorization: "Bearer k" }, body: "{}" });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), body: text.startsWith("{") ? JSON.parse(text) : { text } };
}

describe("JobsRole on a database that does not answer", () => {
  it("serves no jobs and names no address, and job traffic is refused as the database being unreachable", async () => {
    const lines: string[] = [];
    started = role(unreachable, lines);
    await started.start();
    expect(started.servedBy).toBeNull();
    expect(lines.join("\n")).toMatch(/could not read which replica serves jobs \(connect ECONNREFUSED/);

    const answer = await jobCall(started);
    expect(answer.status).toBe(503);
    expect(answer.type).toMatch(/^application\/problem\+json/);
    expect(String(answer.body.detail)).toMatch(/storage is unavailable/);
  });
});

describe("JobsRole with another replica holding the lease", () => {
  it("passes job traffic to the holder's address", async () => {
    started = role(heldElsewhere("http://10.0.0.7:8080"));
    await started.start();
    expect(started.servedBy).toBe("http://10.0.0.7:8080");
  });

  it("names no address when the holder's row has none (never its name, which is no URL)", async () => {
    started = role(heldElsewhere(null));
    await started.start();
    expect(started.servedBy).toBeNull();
  });
});
