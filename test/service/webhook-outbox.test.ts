// Webhooks survive a kill -9: the webhook of a job is written with its final state, so a `svc server` killed while
// the receiver still refuses it delivers it after the restart on the same data. (The retry plan's own tests:
// src/service/webhooks/schedule.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { call, manifest, ProtocolWorker, resource } from "./helpers.js";
import { startService } from "../../src/service/index.js";

const KEY = "webhook-outbox-admin-key";

describe("a webhook and a kill -9", () => {
  let work: string;
  let receiver: Server;
  let receiverUrl: string;
  let accept = false;
  const received: Array<{ status: number; body: any }> = [];
  let svc: ServerProcess | undefined;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "svc-outbox-"));
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const status = accept ? 200 : 503;
        received.push({ status, body: JSON.parse(body) });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  });
  afterAll(async () => {
    svc?.child.kill("SIGKILL");
    receiver.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("is delivered after a restart when the process was killed before its receiver took it", async () => {
    const dataDir = join(work, "data");
    // The endpoint, deployed through the library on the data the server then runs on (the test is its worker).
    const artifact = join(work, "artifact.tar.gz");
    writeFileSync(artifact, "not really a tarball; the service only hashes it");
    const setup = await startService({ dataDir, apiKeys: [KEY] });
    const [endpoint] = await setup.deploy({ app: "hooks", env: "prod", manifest: manifest({ h: resource() }, "hooks"), artifactPath: artifact });
    const minted = await setup.mintKey({ scopes: [`worker:${endpoint!.id}`] });
    await setup.close();

    svc = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_WEBHOOK_ALLOW: "127.0.0.1" }, workers: "none" });
    const run = await call(`${svc.url}/v2/${endpoint!.id}/run`, { key: KEY, body: { input: { n: 1 }, webhook: receiverUrl } });
    expect(run.status).toBe(200);
    const w = new ProtocolWorker(svc.url, minted.id, minted.key);
    await w.register();
    const [job] = await w.take(1);
    await w.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { ok: true } }]);
    // The receiver refuses the first attempt; the process is killed before the next.
    for (const until = Date.now() + 10_000; received.length === 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
    svc.child.kill("SIGKILL");
    await new Promise((r) => svc!.child.once("exit", r));
    expect(received.map((r) => r.status)).toEqual([503]);

    accept = true;
    svc = await startServerProcess({ dataDir, env: { SVC_API_KEY: KEY, SVC_WEBHOOK_ALLOW: "127.0.0.1" }, workers: "none" });
    for (const until = Date.now() + 15_000; !received.some((r) => r.status === 200) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
    const delivered = received.filter((r) => r.status === 200);
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.body).toMatchObject({ id: run.body.id, status: "COMPLETED", output: { ok: true } });
  }, 90_000);
});
