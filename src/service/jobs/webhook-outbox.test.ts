import { describe, expect, it } from "vitest";
import { WebhookOutbox } from "./webhook-outbox.js";
import type { StoreOp, WebhookRow } from "../store/types.js";

const row: WebhookRow = {
  id: "w1",
  jobId: "j1",
  endpointId: "e1",
  event: "completed",
  url: "https://hooks.example/x",
  body: "{}",
  attempts: 0,
  nextAt: 0,
  createdAt: 0,
};

describe("the webhook outbox", () => {
  it("does not send again a row whose read of the due rows began before its attempt was recorded", async () => {
    // The store as PostgreSQL can answer: a read in flight returns the rows as they were when it began.
    let stored: WebhookRow[] = [row];
    const reads: Array<() => void> = [];
    const sent: string[] = [];
    const answers: Array<(status: number) => void> = [];
    const outbox = new WebhookOutbox({
      due: () => {
        const snapshot = [...stored];
        return new Promise((resolve) => reads.push(() => resolve(snapshot)));
      },
      write: async (ops: StoreOp[]) => {
        for (const op of ops) if (op.op === "deleteWebhook") stored = stored.filter((r) => r.id !== op.id);
      },
      log: () => undefined,
      active: () => true,
      send: (post) => {
        sent.push(post.url);
        return new Promise((resolve) => answers.push(resolve));
      },
      intervalMs: 60_000,
    });
    const settle = () => new Promise((r) => setTimeout(r, 20));
    try {
      outbox.kick();
      await settle();
      reads.shift()!(); // the first scan finds the row: its delivery begins
      await settle();
      expect(sent).toHaveLength(1);
      // A second scan reads while the row is still stored (its delivery under way)...
      outbox.kick();
      await settle();
      // ...the receiver answers and the attempt is recorded (the row deleted)...
      answers.shift()!(200);
      await settle();
      expect(stored).toEqual([]);
      // ...then that read answers, with the row as it was.
      reads.shift()!();
      await settle();
      expect(sent).toHaveLength(1);
    } finally {
      await outbox.close(10);
    }
  });
});
