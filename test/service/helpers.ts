// Shared by the service tests: a real service on 127.0.0.1 over a real SQLite file in a temp dir, a manifest
// builder, and a worker that speaks the worker protocol over HTTP (what the runtime does).

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService, type Service, type ServiceOptions } from "../../src/service/index.js";
import { startPostgres, type TestPostgres } from "../postgres.js";
import pg from "pg";
import { openDatabase } from "../../src/service/store/driver.js";
import type { Manifest, ManifestResource } from "svc/internal";

export function resource(overrides: Partial<ManifestResource> = {}): ManifestResource {
  return {
    is_load_balanced: false,
    imageName: "svc-worker:cpu",
    workersMin: 0,
    workersMax: 2,
    gpuIds: "",
    env: {},
    functions: [{ name: "echo", module: "src/index.ts", export: "echo", kind: "function" }],
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: ["cpu3c-1-2"],
    dependencies: [],
    idleTimeout: 60,
    executionTimeoutMs: 600_000,
    maxConcurrency: 1,
    retries: 1,
    volume: null,
    handler: "endpoints/echo/handler.mjs",
    ...overrides,
  };
}

export function manifest(resources: Record<string, ManifestResource>, app = "demo"): Manifest {
  return { version: 1, app, fingerprint: "f".repeat(64), svcVersion: "0.1.0", resources, routes: {}, excluded: [] };
}

export interface TestService {
  service: Service;
  dir: string;
  key: string;
  artifact: string;
  /** The PostgreSQL database the service keeps its state in (SVC_TEST_STORE=postgres); undefined: SQLite. */
  storeUrl?: string;
  close(): Promise<void>;
}

let testPostgres: Promise<TestPostgres> | undefined;

/**
 * With SVC_TEST_STORE=postgres, a new database on the run's PostgreSQL server (test/global-postgres.ts) for each
 * service a test starts; otherwise undefined: the data directory's SQLite file.
 */
export async function testStoreUrl(): Promise<string | undefined> {
  if (process.env.SVC_TEST_STORE !== "postgres") return undefined;
  testPostgres ??= startPostgres();
  return (await testPostgres).createDatabase();
}

export async function startTestService(options: Partial<ServiceOptions> = {}): Promise<TestService> {
  const dir = mkdtempSync(join(tmpdir(), "svc-service-test-"));
  const key = "test-admin-key";
  const artifact = join(dir, "artifact.tar.gz");
  writeFileSync(artifact, "not really a tarball; the service only hashes it");
  const storeUrl = options.storeUrl ?? (await testStoreUrl());
  const service = await startService({ dataDir: join(dir, "data"), apiKeys: [key], leaseMs: 600, heartbeatMs: 150, storeUrl, ...options }).catch(
    (err: unknown) => {
      // A service that would not start (what some tests check) leaves no directory behind.
      rmSync(dir, { recursive: true, force: true });
      throw err;
    },
  );
  const handle: TestService = {
    service,
    dir,
    key,
    artifact,
    storeUrl,
    async close() {
      // handle.service: a test may have restarted the service on the same data dir.
      await handle.service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return handle;
}

export interface HttpResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function call<T = any>(
  url: string,
  opts: { method?: string; key?: string | null; body?: unknown; raw?: string; authorization?: string } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (opts.authorization !== undefined) headers.authorization = opts.authorization;
  else if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  const response = await fetch(url, {
    method: opts.method ?? (opts.body !== undefined || opts.raw !== undefined ? "POST" : "GET"),
    headers,
    body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await response.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: response.status, headers: response.headers, body: body as T, text };
}

export interface TakenJob {
  id: string;
  lease: string;
  function: string | null;
  input: any;
  executionTimeoutMs: number | null;
  attempt: number;
}

/** A worker speaking docs/worker-protocol.md over HTTP. */
export class ProtocolWorker {
  constructor(
    readonly api: string,
    readonly workerId: string,
    readonly token: string,
  ) {}

  static async mint(t: { service: Service }, endpointId: string): Promise<ProtocolWorker> {
    const { id, key } = await t.service.mintKey({ scopes: [`worker:${endpointId}`] });
    return new ProtocolWorker(t.service.url, id, key);
  }

  async post<T = any>(route: string, body: unknown): Promise<HttpResult<T>> {
    return call<T>(`${this.api}/_worker/v1/${route}`, { method: "POST", key: this.token, body });
  }

  async register(concurrency = 1) {
    const r = await this.post("register", { workerId: this.workerId, pid: process.pid, concurrency });
    if (r.status !== 200) throw new Error(`register: ${r.status} ${r.text}`);
    return r.body as { endpoint: { id: string; executionTimeoutMs: number }; leaseMs: number; heartbeatMs: number };
  }

  async take(max = 1, waitMs = 2000): Promise<TakenJob[]> {
    const r = await this.post<{ jobs: TakenJob[] }>("take", { workerId: this.workerId, max, waitMs });
    if (r.status !== 200) throw new Error(`take: ${r.status} ${r.text}`);
    return r.body.jobs;
  }

  async done(results: Array<{ jobId: string; lease: string; status: "COMPLETED" | "FAILED"; output?: unknown; error?: unknown }>) {
    const r = await this.post<{ results: Array<{ jobId: string; accepted: boolean; reason?: string }> }>("done", { results });
    if (r.status !== 200) throw new Error(`done: ${r.status} ${r.text}`);
    return r.body.results;
  }

  async heartbeat(leases: string[]) {
    const r = await this.post<{ lost: string[] }>("heartbeat", { workerId: this.workerId, leases, state: "running" });
    return r.body.lost;
  }

  async events(waitMs = 0) {
    const r = await this.post<{ cancel: string[]; drain: boolean }>("events", { workerId: this.workerId, waitMs });
    return r.body;
  }

  async stream(jobId: string, lease: string, chunks: unknown[]) {
    return (await this.post("stream", { jobId, lease, chunks })).body;
  }
}

export async function until<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, stepMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** An HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it (a webhook's receiver). */
export async function webhookReceiver(): Promise<{ url: string; received: any[]; close(): Promise<void> }> {
  const { createServer } = await import("node:http");
  const received: any[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString()));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, received, close: () => new Promise((r) => server.close(() => r())) };
}

/**
 * A count the test reads from the service's store directly, whichever it is: `sql` with `?` placeholders, one
 * column `n` in one row.
 */
export async function storedCount(t: TestService, sql: string, params: unknown[]): Promise<number> {
  if (t.storeUrl) {
    let i = 0;
    const client = new pg.Client({ connectionString: t.storeUrl });
    await client.connect();
    try {
      const { rows } = await client.query(
        sql.replace(/\?/g, () => `$${++i}`),
        params,
      );
      return Number(rows[0].n);
    } finally {
      await client.end();
    }
  }
  const db = openDatabase(join(t.dir, "data", "svc.sqlite"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare(sql).get(...params) as { n: number }).n;
  } finally {
    db.close();
  }
}
