// svc's service in a process of its own, as a deployed service runs, in front of the HTTP server at argv[2]: one
// LB endpoint whose one worker is that server (outside-server-driver.mjs registers it). The peers bench measures
// it beside nginx and HAProxy, processes of their own too, so that nothing the bench's own process did before
// (other benches' services, timers, compiled code) runs or lingers beside it. Prints the endpoint's URL on stdout
// once it answers; stops with stdin. Callers send `authorization: Bearer bench-key`.
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";
import { createOutsideServerDriver } from "./outside-server-driver.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const upstream = process.argv[2];
const { buildProject } = await import(`${root}dist/build/index.js`);
const { startService } = await import(`${root}dist/service/index.js`);
const work = mkdtempSync(join(tmpdir(), "svc-bench-lb-"));
const project = join(work, "app");
cpSync(join(root, "fixtures", "lb-app"), project, { recursive: true });
const build = await buildProject(project, {});
Object.assign(build.manifest.resources.api, { workersMin: 1, workersMax: 1, maxConcurrency: 1000 });
const service = await startService({ dataDir: join(work, "data"), driver: createOutsideServerDriver(upstream), apiKeys: ["bench-key"] });
const stop = async (code) => {
  await service.close();
  rmSync(work, { recursive: true, force: true });
  process.exit(code);
};
process.stdin.on("end", () => void stop(0));
process.stdin.resume();
try {
  const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
  const url = `${service.url}/lb/${endpoint.id}`;
  const first = await request(`${url}/items/warm`, { headers: { authorization: "Bearer bench-key" } });
  if (first.status !== 200) throw new Error(`svc's proxy answered ${first.status}: ${first.body}`);
  process.stdout.write(`${url}\n`);
} catch (err) {
  process.stderr.write(`svc-lb-child: ${err.stack ?? err}\n`);
  await stop(1);
}
