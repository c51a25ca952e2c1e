import { describe, expect, it } from "vitest";
import { batchStatements, jobsJson, pgParams } from "./index.js";
import { foldJobOps } from "../sqlite.js";
import type { JobRow, StoreOp } from "../types.js";

const job = (id: string): JobRow => ({
  id,
  endpointId: "ep",
  status: "IN_QUEUE",
  input: "{}",
  function: null,
  webhook: null,
  sync: false,
  lowPriority: false,
  createdAt: 1,
  startedAt: null,
  completedAt: null,
  output: null,
  error: null,
  errorType: null,
  errorStack: null,
  attempt: 0,
  retried: 0,
  executionTimeoutMs: null,
  ttlMs: 1000,
  expiresAt: null,
  lease: null,
  workerId: null,
  streamCursor: 0,
});

describe("batchStatements", () => {
  it("sends a tick's inserts, updates, chunks, logs and counters as one statement (atomic without a transaction)", () => {
    const ops: StoreOp[] = [
      { op: "insertJob", job: job("a") },
      { op: "insertJob", job: job("b") },
      { op: "updateJob", id: "old", set: { status: "COMPLETED", completedAt: 5 } },
      { op: "insertChunk", chunk: { jobId: "old", seq: 1, data: "{}" } },
      { op: "insertLog", line: { ts: 1, endpointId: "ep", workerId: "w", jobId: null, stream: "stdout", text: "x" } },
      { op: "addCounters", endpointId: "ep", completed: 1, failed: 0, retried: 0 },
      { op: "addCounters", endpointId: "ep", completed: 1, failed: 0, retried: 0 },
    ];
    const statements = batchStatements(foldJobOps(ops));
    expect(statements).toHaveLength(1);
    const [only] = statements;
    // It updates a job by `id = ANY(...)`: planned once, on connections where a kept plan cannot read the table whole.
    expect(only!.planOnce).toBe(true);
    expect(only!.text).toMatch(/UPDATE jobs AS j SET .* WHERE j\.id = ANY\(\$\d+::text\[\]\)/s);
    // Inserts and counters alone (a /runsync's final commit) read no table that a kept plan could go wrong on.
    expect(
      batchStatements([
        { op: "insertJob", job: job("c") },
        { op: "addCounters", endpointId: "ep", completed: 1, failed: 0, retried: 0 },
      ])[0]!.planOnce,
    ).toBe(true);
    expect(only!.text.startsWith("WITH w0 AS (INSERT INTO jobs")).toBe(true);
    // Every placeholder has its value, renumbered across the parts.
    const placeholders = new Set([...only!.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    expect(Math.max(...placeholders)).toBe(only!.values.length);
    expect(placeholders.size).toBe(only!.values.length);
    // Two rows inserted by one INSERT (their JSON); the counters summed.
    expect((JSON.parse(only!.values[0] as string) as JobRow[]).map((j) => j.id)).toEqual(["a", "b"]);
    expect(only!.values.slice(-3)).toEqual([[2], [0], [0]]);
  });

  it("keeps the place of an op that must keep it", () => {
    const ops: StoreOp[] = [
      { op: "insertJob", job: job("a") },
      { op: "deleteJob", id: "z" },
      { op: "updateJob", id: "a", set: { status: "IN_PROGRESS" } },
    ];
    const texts = batchStatements(foldJobOps(ops)).map((s) => s.text.split(/\s+/).slice(0, 3).join(" "));
    expect(texts).toEqual(["INSERT INTO jobs", "DELETE FROM stream_chunks", "DELETE FROM jobs", "UPDATE jobs AS"]);
  });

  it("adopts handed-off jobs in the batch's last statement, leaving the jobs the batch writes for the next adoption", () => {
    const ops: StoreOp[] = [
      { op: "insertJob", job: job("a") },
      { op: "updateJob", id: "b", set: { status: "COMPLETED" } },
    ];
    const [only, ...rest] = batchStatements(ops, { adopt: true });
    expect(rest).toEqual([]);
    expect(only!.text).toMatch(
      /^WITH w0 AS \(INSERT INTO jobs.*w2 AS \(DELETE FROM job_handoffs .*ARRAY\(SELECT job_id FROM w2\).*\) SELECT \* FROM w4 ORDER BY seq$/s,
    );
    expect(only!.values.at(-1)).toEqual(["b"]);
    // After an op that keeps its place, the adoption is a statement of its own, last (in the same transaction).
    const texts = batchStatements([{ op: "deleteJob", id: "z" }], { adopt: true }).map((st) => st.text.split(/\s+/).slice(0, 3).join(" "));
    expect(texts).toEqual(["DELETE FROM stream_chunks", "DELETE FROM jobs", "WITH w0 AS"]);
    // Without ops: the adoption alone.
    expect(batchStatements([], { adopt: true })).toHaveLength(1);
  });
});

describe("jobsJson", () => {
  it("inserts jobs as the JSON of their rows, with U+FFFD for what PostgreSQL's json cannot give back as text", () => {
    const text = "nul\u0000 lone\ud800 pair\ud83d\ude00 back\\u0000slash back-nul\\\u0000 é";
    const rows = JSON.parse(jobsJson([{ ...job("a"), error: text, errorStack: null }])) as JobRow[];
    expect(rows[0]!.error).toBe("nul\uFFFD lone\uFFFD pair\ud83d\ude00 back\\u0000slash back-nul\\\uFFFD é");
    expect(rows[0]).toEqual({ ...job("a"), error: rows[0]!.error, errorStack: null });
    // Nothing to replace: the JSON as JSON.stringify wrote it.
    const plain = [job("b"), { ...job("c"), input: '{"q":"\\u0000 as text"}' }];
    expect(jobsJson(plain)).toBe(JSON.stringify(plain));
  });
});

describe("pgParams", () => {
  it("puts U+FFFD where PostgreSQL refuses a NUL, and leaves other values as they are", () => {
    const values = ["a\u0000b", ["x", "y\u0000"], 3, null];
    expect(pgParams(values)).toEqual(["a\uFFFDb", ["x", "y\uFFFD"], 3, null]);
    const clean = ["a", 1];
    expect(pgParams(clean)).toBe(clean);
  });
});
