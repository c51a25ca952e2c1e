// `svc endpoint webhook ...` and the delivery log in `svc jobs status` / `svc jobs get`, through the svc binary (and
// its entry point in the test's process) against a real service, a protocol worker and a receiver on 127.0.0.1
// that refuses the first attempt.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { runCliInProcess, runProgram, SVC_BIN } from "../cli-output.js";
import { call, manifest, ProtocolWorker, resource, startTestService, until, type TestService } from "../service/helpers.js";

let t: TestService;
let config: string;
let receiver: Server;
let hookUrl: string;
const bodies: Array<{ body: string; headers: Record<string, string> }> = [];

function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (k.startsWith("SVC_") || k === "CI") delete env[k];
  return { ...env, SVC_CONFIG_DIR: config, SVC_API_URL: t.service.url, SVC_API_KEY: t.key };
}
/** The binary, for the first command; the others through the CLI's entry point in this process (output, exit code). */
const svcBinary = (args: string[]) => runProgram(process.execPath, [SVC_BIN, ...args], { cwd: config, env: cliEnv() });
const svc = (args: string[]) => runCliInProcess(args, { cwd: config, env: cliEnv() });

beforeAll(async () => {
  config = mkdtempSync(join(tmpdir(), "svc-cli-webhooks-"));
  // The receiver listens on 127.0.0.1, which webhooks reach only when the operator allows it.
  t = await startTestService({ webhooks: { retry: { baseMs: 50, factor: 2, maxDelayMs: 500 }, intervalMs: 50, allow: ["127.0.0.1/32"] } });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      bodies.push({ body: Buffer.concat(chunks).toString(), headers: req.headers as Record<string, string> });
      res.writeHead(bodies.length === 1 ? 500 : 204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await new Promise((r) => receiver?.close(r));
  await t?.close();
  rmSync(config, { recursive: true, force: true });
});

it("sets an endpoint's events, rotates its secret (printed once), and shows a job's delivery attempts", async () => {
  const [endpoint] = await t.service.deploy({ app: "clihooks", env: "prod", manifest: manifest({ h: resource() }, "clihooks"), artifactPath: t.artifact });
  const id = endpoint!.id;

  const shown = await svcBinary(["endpoint", "webhook", "show", id]);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toMatch(/^events\s+completed, failed \(default\)$/m);
  expect(shown.stdout).toMatch(/^signingSecret\s+none yet/m);

  const set = await svc(["endpoint", "webhook", "set", id, "--events", "started,completed", "--json"]);
  expect(JSON.parse(set.stdout)).toMatchObject({ events: ["started", "completed"], eventsDefault: false });
  const bad = await svc(["endpoint", "webhook", "set", id, "--events", "finished"]);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain("--events takes started, progress, completed, failed");

  const rotated = await svc(["endpoint", "webhook", "rotate-secret", id]);
  expect(rotated.code).toBe(0);
  const secret = rotated.stdout.trim();
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
  expect(rotated.stderr).toContain("shown this once");
  expect((await svc(["endpoint", "webhook", "show", id])).stdout).not.toContain(secret);

  const run = await call(`${t.service.url}/v2/${id}/run`, { key: t.key, body: { input: {}, webhook: hookUrl, webhookEvents: ["completed"] } });
  const worker = await ProtocolWorker.mint(t, id);
  await worker.register();
  const [job] = await worker.take(1);
  await worker.done([{ jobId: job!.id, lease: job!.lease, status: "COMPLETED", output: { ok: 1 } }]);
  await until(() => bodies.length >= 2, 10_000);
  for (const b of bodies) expect(new Webhook(secret).verify(b.body, b.headers)).toMatchObject({ id: run.body.id, status: "COMPLETED" });

  // The second attempt's record is written just after the receiver answered it.
  await until(async () => (await call(`${t.service.url}/v2/${id}/webhook-deliveries/${run.body.id}`, { key: t.key })).body.deliveries.length === 2);
  const json = JSON.parse((await svc(["jobs", "get", id, run.body.id, "--json"])).stdout);
  expect(json).toMatchObject({ id: run.body.id, status: "COMPLETED", output: { ok: 1 }, webhookPending: [] });
  expect(json.webhookDeliveries.map((d: { attempt: number; status: number; outcome: string }) => [d.attempt, d.status, d.outcome])).toEqual([
    [1, 500, "retrying"],
    [2, 204, "delivered"],
  ]);
  const human = await svc(["jobs", "status", id, run.body.id]);
  expect(human.stdout).toContain("Webhook deliveries:");
  expect(human.stdout).toMatch(/completed\s+1\s+500\s+\d+ ms\s+retrying/);
  expect(human.stdout).toMatch(/completed\s+2\s+204\s+\d+ ms\s+delivered/);
}, 120_000);
