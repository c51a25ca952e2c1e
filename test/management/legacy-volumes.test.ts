// Endpoints deployed before `volume` settings were resolved per user named a plain folder <dataDir>/volumes/<name>.
// At the next start such a setting becomes a network volume of the endpoint's owner, and the folder (named by one
// user alone) becomes that volume with its files. Real service, real SQLite file, restarted on the same directory.

import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startService } from "../../src/service/index.js";
import { openDatabase } from "../../src/service/store/driver.js";
import { call, manifest, resource, startTestService, type TestService } from "../service/helpers.js";

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  await t?.close();
});

it.skipIf(process.env.SVC_TEST_STORE === "postgres")(
  "turns an earlier version's plain volume folder into a volume of the endpoint's owner, its files kept",
  async () => {
    const dataDir = join(t.dir, "data");
    await t.service.deploy({ app: "old", env: "prod", manifest: manifest({ echo: resource({ volume: "models" }) }, "old"), artifactPath: t.artifact });
    await t.service.close();
    // As an earlier version left it: the endpoint names "models", no volume record, a folder of that name.
    const db = openDatabase(join(dataDir, "svc.sqlite"));
    db.prepare("DELETE FROM network_volumes").run();
    db.close();
    mkdirSync(join(dataDir, "volumes", "models"), { recursive: true });
    writeFileSync(join(dataDir, "volumes", "models", "weights.bin"), "kept");

    const logs: string[] = [];
    t.service = await startService({ dataDir, apiKeys: [t.key], log: (m) => logs.push(m) });
    const volumes = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key })).body as Array<{ id: string; name: string }>;
    expect(volumes).toEqual([expect.objectContaining({ name: "models" })]);
    expect(readFileSync(join(dataDir, "volumes", volumes[0]!.id, "weights.bin"), "utf8")).toBe("kept");
    expect(logs).toContain(`endpoint volume "models" of user default is now network volume ${volumes[0]!.id} (its files kept)`);
  },
);
