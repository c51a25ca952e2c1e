// The service's resident memory with large jobs queued behind no worker: a real `svc server` process, read from
// /proc/<pid>/status (VmRSS). 40 queued jobs of 9 MB (360 MB of input) must not be held in the service's memory
// (they live in the store until a worker takes them), and after purge-queue a second flood of the same size must
// not add to it: what the first one used was given back.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const KEY = "queue-memory-test-key";
const JOBS = 40;
const INPUT_BYTES = 9 * 1024 * 1024;
/**
 * Above the idle service: the request bodies being parsed and written, and V8's heap before its next collection,
 * whatever is queued (measured 130 to 220 MB on a loaded 2-core host). Holding the queued inputs in memory takes
 * 520 MB more for these 40 jobs, and grows with every job queued.
 */
const BOUND_MB = 300;

let dir: string;
let server: ServerProcess;
let endpointId: string;

function rssMb(): number {
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${server.child.pid}/status`, "utf8"))?.[1]);
  return Math.round(kb / 1024);
}

async function api(method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  const r = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" }, body });
  return { status: r.status, text: await r.text() };
}

const settle = (ms = 1000) => new Promise((r) => setTimeout(r, ms));

async function flood(): Promise<void> {
  const body = JSON.stringify({ input: { blob: "x".repeat(INPUT_BYTES) } });
  for (let i = 0; i < JOBS; i++) {
    const r = await api("POST", `/v2/${endpointId}/run`, body);
    expect(r.status, r.text.slice(0, 300)).toBe(200);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-queue-memory-"));
  server = await startServerProcess({ dataDir: join(dir, "data"), env: { SVC_API_KEY: KEY }, workers: "none" });
  const template = JSON.parse((await api("POST", "/v1/templates", JSON.stringify({ name: "t", imageName: "python:3.12" }))).text).id;
  endpointId = JSON.parse((await api("POST", "/v1/endpoints", JSON.stringify({ name: "busy", templateId: template, workersMax: 0 }))).text).id;
}, 60_000);
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("queued inputs and the service's memory", () => {
  it(`keeps resident memory within ${BOUND_MB} MB of idle with ${JOBS} jobs of 9 MB queued, and after purge-queue a second flood adds nothing`, async () => {
    await settle(1500);
    const baseline = rssMb();
    await flood();
    await settle();
    const queued = rssMb();
    const purged = await api("POST", `/v2/${endpointId}/purge-queue`);
    expect(JSON.parse(purged.text).removed).toBe(JOBS);
    await settle();
    const afterPurge = rssMb();
    await flood();
    await settle();
    const again = rssMb();
    console.log(`VmRSS MB: idle ${baseline}, ${JOBS} x 9 MB queued ${queued}, purged ${afterPurge}, ${JOBS} more queued ${again}`);
    expect(queued - baseline).toBeLessThan(BOUND_MB);
    expect(again - baseline).toBeLessThan(BOUND_MB);
    const health = JSON.parse((await api("GET", `/v2/${endpointId}/health`)).text);
    expect(health.jobs.inQueue).toBe(JOBS);
  }, 180_000);
});
