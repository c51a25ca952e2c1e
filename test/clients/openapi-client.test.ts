// /openapi.json describes every public route, checked by an OpenAPI validator (@readme/openapi-parser), and is
// good enough to generate a typed client from: openapi-typescript turns it into types, tsc checks a program that
// drives the job API through openapi-fetch with them, and the program runs against the real service.

import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@readme/openapi-parser";
import openapiTS, { astToString } from "openapi-typescript";
import { afterAll, beforeAll, expect, it } from "vitest";
import { build } from "esbuild";
import { REPO } from "../lb/harness.js";
import { call, manifest, ProtocolWorker, resource, startTestService, type TestService } from "../service/helpers.js";

let t: TestService;
let doc: Record<string, any>;
let endpointId: string;
let work: string;

beforeAll(async () => {
  t = await startTestService();
  [{ id: endpointId }] = (await t.service.deploy({ app: "gen", env: "test", artifactPath: t.artifact, manifest: manifest({ echo: resource() }) })) as Array<{
    id: string;
  }>;
  doc = (await call(`${t.service.url}/openapi.json`)).body;
  work = mkdtempSync(join(tmpdir(), "svc-openapi-client-"));
});
afterAll(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

it("is a valid OpenAPI 3.1 document describing every public route family", async () => {
  const result = await validate(structuredClone(doc) as never);
  expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
  expect(result.valid).toBe(true);
  const paths = Object.keys(doc.paths);
  for (const p of [
    "/v2/{endpoint_id}/run",
    "/v2/{endpoint_id}/runsync",
    "/v2/{endpoint_id}/status/{job_id}",
    "/v2/{endpoint_id}/stream/{job_id}",
    "/v2/{endpoint_id}/cancel/{job_id}",
    "/v2/{endpoint_id}/retry/{job_id}",
    "/v2/{endpoint_id}/purge-queue",
    "/v2/{endpoint_id}/health",
    "/v2/{endpoint_id}/openai/v1/chat/completions",
    "/v2/{endpoint_id}/openai/v1/responses",
    "/v1/apps/{app}/builds",
    "/v1/apps/{app}/environments/{env}/activate",
    "/v1/endpoints/{endpointId}/logs",
    "/v1/keys",
    "/v1/secrets/{name}",
    "/lb/{endpoint_id}/{path}",
  ]) {
    expect(paths).toContain(p);
  }
});

it("generates a typed client (openapi-typescript + openapi-fetch) that type-checks and drives the job API", async () => {
  writeFileSync(join(work, "api.d.ts"), astToString(await openapiTS(structuredClone(doc) as never)));
  // The program a user would write with the generated types; tsc refuses it if a path, body or answer is wrong.
  writeFileSync(
    join(work, "client.ts"),
    `import createClient from "openapi-fetch";
import type { paths } from "./api.js";
const [baseUrl, key, endpoint_id] = process.argv.slice(2) as [string, string, string];
const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${key}\` } });
const run = await client.POST("/v2/{endpoint_id}/run", { params: { path: { endpoint_id } }, body: { input: { n: 1 }, policy: { ttl: 60000 } } });
if (!run.data) throw new Error("run: " + JSON.stringify(run.error));
const id: string = run.data.id;
const status = await client.GET("/v2/{endpoint_id}/status/{job_id}", { params: { path: { endpoint_id, job_id: id } } });
const health = await client.GET("/v2/{endpoint_id}/health", { params: { path: { endpoint_id } } });
const ready: number | undefined = health.data?.workers.ready;
const bad = await client.POST("/v2/{endpoint_id}/run", { params: { path: { endpoint_id } }, body: { input: 1, policy: { ttl: 0 } } });
console.log(JSON.stringify({ id, status: status.data?.status, ready, badStatus: bad.response.status, badErrors: (bad.error as { errors?: string[] } | undefined)?.errors }));
`,
  );
  writeFileSync(
    join(work, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", noEmit: true, skipLibCheck: true },
      include: ["client.ts", "api.d.ts"],
    }),
  );
  writeFileSync(join(work, "package.json"), JSON.stringify({ type: "module" }));
  symlinkSync(join(REPO, "node_modules"), join(work, "node_modules"), "dir");
  execFileSync(process.execPath, [join(REPO, "node_modules", "typescript", "bin", "tsc"), "-p", work], { encoding: "utf8" });
  await build({ entryPoints: [join(work, "client.ts")], bundle: true, platform: "node", format: "esm", outfile: join(work, "client.mjs"), logLevel: "silent" });
  // Not execFileSync: the service runs in this process and must keep answering.
  const { stdout } = await promisify(execFile)(process.execPath, [join(work, "client.mjs"), t.service.url, t.key, endpointId], { encoding: "utf8" });
  const out = JSON.parse(stdout);
  expect(out).toMatchObject({ status: "IN_QUEUE", ready: 0, badStatus: 422, badErrors: ["$.policy.ttl: must be at least 1"] });
  // The job is really there, for a worker to take.
  const worker = await ProtocolWorker.mint(t, endpointId);
  await worker.register();
  expect((await worker.take(1))[0]?.id).toBe(out.id);
}, 120_000);
