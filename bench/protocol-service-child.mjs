// The service of the worker-protocol bench (protocol.bench.mjs) in a process of its own, so that its CPU time is
// the service's alone: no driver (the bench starts the workers itself), two endpoints of the trivial bench app, one
// for each protocol's worker, a worker key minted for each. Prints one JSON line once it answers:
//   { url, own: { id, url, workerId, token }, provider: { ... } }
// then answers each stdin line "cpu" with `{ cpuMs }` (its user + system CPU so far); stdin's end stops it.
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const work = mkdtempSync(join(tmpdir(), "svc-bench-protocol-"));
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);

let service;
const stop = async (code) => {
  await service?.close();
  rmSync(work, { recursive: true, force: true });
  process.exit(code);
};
try {
  const project = join(work, "app");
  cpSync(join(root, "fixtures", "bench-trivial"), project, { recursive: true });
  const build = await buildProject(project, {});
  service = await startService({ dataDir: join(work, "data"), apiKeys: ["bench-key"] });
  const endpointFor = async (app) => {
    const [endpoint] = await service.deploy({ app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    const { id: workerId, key: token } = await service.mintKey({ scopes: [`worker:${endpoint.id}`] });
    return { id: endpoint.id, url: endpoint.url, workerId, token };
  };
  const own = await endpointFor("protocol-own");
  const provider = await endpointFor("protocol-provider");
  process.stdout.write(`${JSON.stringify({ url: service.url, own, provider })}\n`);
} catch (err) {
  process.stderr.write(`protocol-service-child: ${err.stack ?? err}\n`);
  await stop(1);
}
const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim() !== "cpu") return;
  const { user, system } = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ cpuMs: (user + system) / 1000 })}\n`);
});
lines.on("close", () => void stop(0));
