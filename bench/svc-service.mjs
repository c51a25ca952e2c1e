// svc's service as the benches that compare it with other servers run it: one function a kind of contender, used
// in the service's own process (svc-child.mjs for the peers benches, profile.mjs --child). Callers send
// `authorization: Bearer bench-key` (BENCH_KEY).
import { cpSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "./http.mjs";
import { createOutsideServerDriver } from "./outside-server-driver.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
export const BENCH_KEY = "bench-key";
const headers = { authorization: `Bearer ${BENCH_KEY}` };

async function buildFixture(work, fixture) {
  const { buildProject } = await import(`${root}dist/build/index.js`);
  const project = join(work, "app");
  cpSync(join(root, "fixtures", fixture), project, { recursive: true });
  return buildProject(project, {});
}

/** Deploys `build` on `service` and checks one request: the endpoint, or the service closed and the error thrown. */
async function deployChecked(service, build, check) {
  try {
    const [endpoint] = await service.deploy({ app: build.manifest.app, env: "bench", manifest: build.manifest, artifactPath: build.artifactPath });
    await check(endpoint);
    return endpoint;
  } catch (err) {
    await service.close();
    throw err;
  }
}

/**
 * An LB endpoint (`fixtures/lb-app`, one worker, maxConcurrency 1000) whose one worker is the HTTP server already
 * running at `upstream` (outside-server-driver.mjs), in `work`: `{ service, url }`, `url` the endpoint's address.
 */
export async function startSvcLb(upstream, work) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const { lbEndpointUrl } = await import(`${root}dist/service/lb/address.js`);
  const build = await buildFixture(work, "lb-app");
  Object.assign(build.manifest.resources.api, { workersMin: 1, workersMax: 1, maxConcurrency: 1000 });
  const service = await startService({ dataDir: join(work, "data"), driver: createOutsideServerDriver(upstream), apiKeys: [BENCH_KEY] });
  const endpoint = await deployChecked(service, build, async ({ id }) => {
    const first = await request(`${lbEndpointUrl(service.url, id)}/items/warm`, { headers });
    if (first.status !== 200) throw new Error(`svc's proxy answered ${first.status}: ${first.body}`);
  });
  return { service, url: lbEndpointUrl(service.url, endpoint.id) };
}

/**
 * The queue bench's endpoint (`fixtures/bench-trivial`, two process workers of 16 jobs each) on the embedded store,
 * or on PostgreSQL at `storeUrl`, in `work`; warmed (50 `/runsync`: both workers started, connections open):
 * `{ service, url }`, `url` the endpoint's job API (`.../v2/{id}`).
 */
export async function startSvcQueue(work, { storeUrl, metrics } = {}) {
  const { startService } = await import(`${root}dist/service/index.js`);
  const { createProcessDriver } = await import(`${root}dist/drivers/process.js`);
  const build = await buildFixture(work, "bench-trivial");
  const service = await startService({
    dataDir: join(work, "data"),
    storeUrl,
    driver: createProcessDriver({ cacheDir: join(work, "cache") }),
    apiKeys: [BENCH_KEY],
    metrics,
  });
  const endpoint = await deployChecked(service, build, async (endpoint) => {
    for (let i = 0; i < 50; i++) {
      const res = await request(`${endpoint.url}/runsync`, { method: "POST", headers, body: { input: { i } } });
      if (res.status !== 200 || !res.body.includes("COMPLETED")) throw new Error(`svc's /runsync answered ${res.status}: ${res.body.slice(0, 200)}`);
    }
  });
  return { service, url: endpoint.url };
}
