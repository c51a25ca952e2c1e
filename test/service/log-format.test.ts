// `svc server --log-format json`: every operator message on stderr is one JSON object a line, with time, level and
// msg, and the endpoint and worker a message is about; the URL alone still goes to stdout. SVC_LOG_FORMAT=json does
// the same; the human lines stay the default.

import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { copyFixture, deployFixture } from "../fixture-project.js";
import { call, until } from "./helpers.js";

const KEY = "log-format-admin-key";

let work: string;
const servers: ServerProcess[] = [];

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-log-format-"));
});

afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(work, { recursive: true, force: true });
});

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.trim() !== "");
}

it("prints one JSON object a line, with the endpoint and worker a message is about", async () => {
  const server = await startServerProcess({ dataDir: join(work, "data"), env: { SVC_API_KEY: KEY }, args: ["--log-format", "json"] });
  servers.push(server);
  await deployFixture(copyFixture("bench-trivial", work), server.url, KEY);
  const endpoint = (await call(`${server.url}/v1/apps/bench-trivial/environments/prod`, { key: KEY })).body.endpoints[0].id as string;
  await until(() => server.log().includes("started for endpoint"), 30_000);
  await server.stop();

  const records = lines(server.log()).map((l) => JSON.parse(l) as Record<string, unknown>);
  for (const r of records) {
    expect(Number.isNaN(Date.parse(r.time as string))).toBe(false);
    expect(["info", "warn", "error"]).toContain(r.level);
    expect(typeof r.msg).toBe("string");
  }
  expect(records.map((r) => r.msg)).toContain(`web console: ${server.url}/console/`);
  expect(records.find((r) => (r.msg as string).startsWith("svc service listening"))).toMatchObject({ level: "info" });
  const started = records.find((r) => (r.msg as string).includes("started for endpoint"));
  expect(started).toMatchObject({ level: "info", endpoint, worker: expect.stringMatching(/\S/) });
  expect(started!.msg).toContain(started!.worker as string);
  expect(records.find((r) => r.msg === "SIGTERM: stopping")).toBeDefined();
}, 120_000);

it("takes SVC_LOG_FORMAT=json too, and stays human by default", async () => {
  const json = await startServerProcess({ dataDir: join(work, "data-env"), env: { SVC_API_KEY: KEY, SVC_LOG_FORMAT: "json" }, workers: "none" });
  servers.push(json);
  await json.stop();
  expect(lines(json.log()).length).toBeGreaterThan(0);
  for (const l of lines(json.log())) expect(JSON.parse(l)).toMatchObject({ level: expect.any(String), msg: expect.any(String) });

  const human = await startServerProcess({ dataDir: join(work, "data-human"), env: { SVC_API_KEY: KEY }, workers: "none" });
  servers.push(human);
  await human.stop();
  expect(human.log()).toContain("web console: ");
  expect(() => JSON.parse(lines(human.log())[0]!)).toThrow();
}, 60_000);
