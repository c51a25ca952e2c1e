// A driver's direct address for a worker (Docker: the container's IP, skipping the engine's port forwarding) is
// used only if the worker answers there. Here the real process driver, with an address added to each handle that
// answers nothing (as a remote engine's container IP would not): the proxy must keep the worker's own address.
// The case where it does answer runs against a real engine in test/docker/image-endpoint.test.ts.

import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProcessDriver } from "../../src/drivers/process.js";
import type { WorkerDriver } from "../../src/drivers/types.js";
import { lbEndpointUrl } from "../../src/service/lb/address.js";
import { startApp, until, type LiveApp } from "./harness.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

const NOWHERE = "http://127.0.0.1:9";
let app: LiveApp;
let cacheDir: string;

beforeAll(async () => {
  cacheDir = mkdtempSync(join(tmpdir(), "svc-direct-"));
  const real = createProcessDriver({ cacheDir, closeGraceMs: 500 });
  const driver: WorkerDriver = {
    name: real.name,
    close: () => real.close(),
    async start(launch) {
      const handle = await real.start(launch);
      return {
        workerId: handle.workerId,
        exited: handle.exited,
        stop: (ms) => handle.stop(ms),
        kill: () => handle.kill(),
        localSocket: handle.localSocket,
        directAddress: NOWHERE,
      };
    },
  };
  app = await startApp("fixtures/lb-app", { resources: { api: { workersMin: 1, workersMax: 1 } }, service: { driver } });
});

afterAll(async () => {
  await app?.close();
  rmSync(cacheDir, { recursive: true, force: true });
});

describe("a direct address that does not answer", () => {
  it("is tried once the worker answers /ping, logged, and the proxy keeps the worker's own address", async () => {
    const api = app.endpoints.find((e) => e.name === "api")!;
    const auth = { authorization: `Bearer ${app.key}` };
    const first = await fetch(`${lbEndpointUrl(app.service.url, api.id)}/items/1`, { headers: auth });
    expect(first.status).toBe(200);
    const logs = async () =>
      ((await (await fetch(`${app.service.url}/v1/endpoints/${api.id}/logs`, { headers: auth })).json()) as { lines: Array<{ text: string }> }).lines.map(
        (l) => l.text,
      );
    const line = await until("the direct address to be tried", async () => (await logs()).find((t) => t.includes(`does not answer at ${NOWHERE}`)));
    expect(line).toMatch(
      new RegExp(`^lb: worker w\\w+ does not answer at ${NOWHERE.replace(/[.:/]/g, "\\$&")} from the service: the proxy keeps http://127\\.0\\.0\\.1:\\d+$`),
    );
    expect((await logs()).some((t) => t.includes("the proxy uses it instead of"))).toBe(false);
    const again = await fetch(`${lbEndpointUrl(app.service.url, api.id)}/items/2`, { headers: auth });
    expect([again.status, ((await again.json()) as { id: string }).id]).toEqual([200, "2"]);
  });
});
