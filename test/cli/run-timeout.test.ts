// `svc run --timeout` kept by the CLI itself, through the real binary against a real `svc server` (a process of
// its own): a worker takes the job and never answers (a handler that ignores its timeout), and the service stops
// answering while the job runs (frozen with SIGSTOP, as an overloaded or cut-off service would be), so it neither
// ends the job nor tells the CLI. `svc run` must still stop at the timeout plus its grace, report the job
// TIMED_OUT with exit code 1 (as a service-side timeout gives), and cancel it once the service answers again.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TIMEOUT_GRACE_MS } from "../../src/cli/commands/run.js";
import { call, ProtocolWorker, until } from "../service/helpers.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const KEY = "run-timeout-admin-key";

let dir: string;
let server: ChildProcess;
let url: string;

// The service as `svc server --workers none` runs it (no driver: the only worker is the test's own, speaking the
// worker protocol), in a process of its own so that it can be frozen; it also mints the worker's token, which
// only the service itself can do.
const SERVER = `
import { startService } from ${JSON.stringify(join(repo, "dist", "service", "index.js"))};
import { createInterface } from "node:readline";
const service = await startService({ dataDir: process.argv[1], apiKeys: [${JSON.stringify(KEY)}], port: 0 });
process.stdout.write(service.url + "\\n");
for await (const endpointId of createInterface({ input: process.stdin })) {
  const { id, key } = await service.mintKey({ scopes: ["worker:" + endpointId] });
  process.stdout.write(JSON.stringify({ id, key }) + "\\n");
}
`;

function startServer(dataDir: string): Promise<string> {
  server = spawn(process.execPath, ["--input-type=module", "-e", SERVER, dataDir], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  server.stderr!.on("data", (d) => (stderr += d.toString()));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start:\n${stderr}`)), 30_000);
    server.stdout!.once("data", (d) => {
      clearTimeout(timer);
      resolve(d.toString().trim());
    });
    server.on("exit", (code) => reject(new Error(`the service exited ${code}:\n${stderr}`)));
  });
}

function mintWorkerToken(endpointId: string): Promise<{ id: string; key: string }> {
  return new Promise((resolve) => {
    server.stdout!.once("data", (d) => resolve(JSON.parse(d.toString())));
    server.stdin!.write(`${endpointId}\n`);
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-run-timeout-"));
  url = await startServer(join(dir, "data"));
}, 60_000);

afterAll(() => {
  if (server && server.exitCode === null) {
    server.kill("SIGCONT");
    server.kill("SIGKILL");
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("svc run --timeout when the service does not end the job", () => {
  it("stops waiting at the timeout plus its grace, reports TIMED_OUT with exit 1, and cancels the job", async () => {
    const template = await call(`${url}/v1/templates`, { key: KEY, body: { name: "never", imageName: "example/never:1" } });
    expect(template.status, template.text).toBeLessThan(300);
    const endpoint = await call(`${url}/v1/endpoints`, { key: KEY, body: { name: "never-answers", templateId: template.body.id } });
    expect(endpoint.status, endpoint.text).toBeLessThan(300);
    const endpointId = endpoint.body.id as string;
    const minted = await mintWorkerToken(endpointId);
    const worker = new ProtocolWorker(url, minted.id, minted.key);
    await worker.register();

    const timeoutMs = 4_000;
    const started = Date.now();
    const cli = spawn(process.execPath, [bin, "run", endpointId, '{"n":1}', "--timeout", `${timeoutMs / 1000}s`], {
      env: { ...process.env, CI: "true", SVC_API_URL: url, SVC_API_KEY: KEY, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    let stdout = "";
    cli.stderr!.on("data", (d) => (stderr += d.toString()));
    cli.stdout!.on("data", (d) => (stdout += d.toString()));
    const exit = new Promise<number | null>((resolve) => cli.on("exit", (code) => resolve(code)));

    // The worker takes it and never answers.
    const [job] = await until(
      async () => {
        const jobs = await worker.take(1, 1000);
        return jobs.length > 0 ? jobs : undefined;
      },
      20_000,
      0,
    );
    const takenAt = Date.now();
    expect(job!.executionTimeoutMs).toBe(timeoutMs);
    // Long enough for the CLI's /stream long-poll (1.5 s at most) to have seen it running, well before the service
    // would end it: then the service stops answering.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect((await call(`${url}/v2/${endpointId}/status/${job!.id}`, { key: KEY })).body.status).toBe("IN_PROGRESS");
    server.kill("SIGSTOP");
    try {
      // Frozen past the CLI's deadline (the start it saw, at most 1.5 s late, plus the timeout and grace): the CLI
      // gives up by itself meanwhile and sends its cancel, which the service answers once it runs again.
      await new Promise((resolve) => setTimeout(resolve, takenAt + timeoutMs + TIMEOUT_GRACE_MS + 2_000 - Date.now()));
      // It has given up already, while the service still says nothing.
      expect(stderr).toMatch(new RegExp(`job ${job!.id} TIMED_OUT: no result within its execution timeout of 4 s \\(and 2 s of grace\\); cancelling it\\n`));
      expect(cli.exitCode, "the CLI waits for the cancel's answer (5 s at most)").toBeNull();
    } finally {
      server.kill("SIGCONT");
    }
    const code = await exit;
    const took = Date.now() - started;
    expect(code, stderr).toBe(1);
    expect(stderr).toMatch(new RegExp(`job ${job!.id}: (cancelled on the service|the service has ended it: TIMED_OUT)\\n`));
    expect(stdout).toBe("");
    // Not before the timeout and its grace (counted from the start), and not much after: no wait on the frozen service.
    expect(Date.now() - takenAt).toBeGreaterThanOrEqual(timeoutMs + TIMEOUT_GRACE_MS - 50);
    expect(took, stderr).toBeLessThan(timeoutMs + TIMEOUT_GRACE_MS + 6_000);
    // It does not run on unseen: the service ended it (the cancel, or its own timeout once it ran again).
    const final = await until(
      async () => {
        const s = (await call(`${url}/v2/${endpointId}/status/${job!.id}`, { key: KEY })).body;
        return ["CANCELLED", "TIMED_OUT"].includes(s.status) ? s : undefined;
      },
      10_000,
      100,
    );
    expect(["CANCELLED", "TIMED_OUT"]).toContain(final.status);
  }, 90_000);
});
