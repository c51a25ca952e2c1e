// The webhook parts the engine calls (jobEvent, ops), and endpoints' settings and secrets, over a real SQLite store.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { recordJson } from "../jobs/routes.js";
import { SecretBox } from "../secrets/box.js";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";
import type { JobCommands, JobRow, Store } from "../store/types.js";
import { Webhooks } from "./index.js";
import { signedHeaders } from "./signing.js";

let dir: string;
let store: Store & JobCommands;
let webhooks: Webhooks;
const box = new SecretBox({ current: randomBytes(32), previous: [] });

const job = (over: Partial<JobRow> = {}): JobRow => ({
  id: "job-1",
  endpointId: "ep1",
  status: "IN_PROGRESS",
  input: "{}",
  function: null,
  webhook: "http://127.0.0.1:9/hook",
  sync: false,
  lowPriority: false,
  createdAt: 1_000,
  startedAt: 2_000,
  completedAt: null,
  output: null,
  error: null,
  errorType: null,
  errorStack: null,
  attempt: 1,
  retried: 0,
  executionTimeoutMs: 60_000,
  ttlMs: 60_000,
  expiresAt: null,
  lease: "l",
  workerId: "w",
  streamCursor: 0,
  ...over,
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-webhooks-"));
  store = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
  // Never active: nothing is delivered, the outbox rows stay to be read.
  webhooks = new Webhooks({ store, box, write: (ops) => store.apply(ops), log: () => undefined, active: () => false, recordJson });
});
afterEach(async () => {
  await webhooks.close(0);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("jobEvent", () => {
  it("writes a progress message carrying the reported value when the job's filter asks for progress", async () => {
    expect(await webhooks.jobEvent(job({ webhookEvents: "progress,completed" }), "progress", { percent: 40 })).toBe(true);
    const [row] = await store.pendingWebhooks!("job-1");
    expect(row).toMatchObject({ event: "progress", endpointId: "ep1", url: "http://127.0.0.1:9/hook", attempts: 0 });
    expect(JSON.parse(row!.body)).toMatchObject({ id: "job-1", status: "IN_PROGRESS", output: { percent: 40 } });
  });

  it("writes nothing for an event the filter leaves out (default: completed and failed), nor for a job without webhook", async () => {
    expect(await webhooks.jobEvent(job(), "progress", { percent: 40 })).toBe(false);
    expect(await webhooks.jobEvent(job(), "started")).toBe(false);
    expect(await webhooks.jobEvent(job({ webhook: null, webhookEvents: "progress" }), "progress", 1)).toBe(false);
    expect(await store.pendingWebhooks!("job-1")).toEqual([]);
    expect(webhooks.ops(job({ status: "COMPLETED" }), "completed")).toHaveLength(1);
    expect(webhooks.ops(job({ status: "FAILED" }), "failed")).toHaveLength(1);
  });

  it("follows the endpoint's filter unless the job has its own", async () => {
    await webhooks.settings.setEvents("ep1", ["started"]);
    expect(webhooks.ops(job(), "started")).toHaveLength(1);
    expect(webhooks.ops(job({ status: "COMPLETED" }), "completed")).toHaveLength(0);
    expect(webhooks.ops(job({ webhookEvents: "completed" }), "started")).toHaveLength(0);
    await webhooks.settings.setEvents("ep1", null);
    expect(webhooks.ops(job(), "started")).toHaveLength(0);
  });
});

describe("signing secrets", () => {
  it("are sealed at rest, sign with the new and the replaced one until it expires, and are made for an endpoint that has none", async () => {
    const now = 1_700_000_000_000;
    const first = await webhooks.settings.rotate("ep1", 0, now);
    const stored = (await store.webhookSettings!("ep1"))[0]!;
    expect(stored.secret).not.toContain(first.secret.slice(6));
    expect(Buffer.from(stored.secret!, "base64").toString("latin1")).not.toContain(first.secret);
    expect(await webhooks.settings.signingSecrets("ep1", now)).toEqual([first.secret]);

    const second = await webhooks.settings.rotate("ep1", 60_000, now + 1);
    expect(second.view.signingSecret).toEqual({ createdAt: now + 1, previousExpiresAt: now + 60_001 });
    const both = await webhooks.settings.signingSecrets("ep1", now + 2);
    expect(both).toEqual([second.secret, first.secret]);
    const headers = signedHeaders(both, "msg_x", Date.now(), "{}");
    expect(() => new Webhook(first.secret).verify("{}", headers)).not.toThrow();
    expect(() => new Webhook(second.secret).verify("{}", headers)).not.toThrow();
    expect(await webhooks.settings.signingSecrets("ep1", now + 60_001)).toEqual([second.secret]);

    // Another service key cannot open them (the seal is bound to the key and the endpoint).
    const other = new Webhooks({
      store,
      box: new SecretBox({ current: randomBytes(32), previous: [] }),
      write: (ops) => store.apply(ops),
      log: () => undefined,
      active: () => false,
      recordJson,
    });
    expect(await other.settings.signingSecrets("ep1", now + 60_001)).toEqual([]);
    await other.close(0);

    expect(webhooks.settings.view("ep2").signingSecret).toBeNull();
    const made = await webhooks.settings.signingSecrets("ep2");
    expect(made).toHaveLength(1);
    expect(made[0]).toMatch(/^whsec_/);
  });
});
