// Destructive management commands (`svc volume delete`, `svc endpoint delete`, `svc keys revoke`) as a user runs
// them (node bin/svc.js) against a real service: without a terminal, or with CI set, they refuse with exit 2
// naming --yes and change nothing; on a terminal (a real pseudo-terminal, through `script`) they ask, and only
// "y" goes ahead; --yes skips the question.

import { describe, expect, it } from "vitest";
import { cliAgainstTestService, SVC_BIN as bin } from "../cli-output.js";
import { ExitCode } from "../../src/errors.js";
import { call } from "../service/helpers.js";

const cli = cliAgainstTestService("svc-cli-confirm-");

/** Run a program against the test service, writing `input` to its stdin. */
const run = (file: string, args: string[], extra: Record<string, string>, input: string) => cli.run(file, args, extra, input);

/** Without a terminal: stdin (which says "y"), stdout and stderr are pipes. */
const svc = (args: string[], extra: Record<string, string> = {}) => run(process.execPath, [bin, ...args], extra, "y\n");

/** On a pseudo-terminal (util-linux `script`), typing `answer` when asked; the terminal's output as one text. */
async function svcOnTty(args: string[], answer: string, extra: Record<string, string> = {}) {
  const command = [process.execPath, bin, ...args].map((a) => `'${a}'`).join(" ");
  const r = await run("script", ["-qec", command, "/dev/null"], extra, `${answer}\n`);
  return { code: r.code, output: r.stdout };
}

const volumeExists = async (id: string) => (await call(`${cli.t.service.url}/v2/network-volumes/${id}`, { key: cli.t.key })).status === 200;
const endpointExists = async (id: string) => (await call(`${cli.t.service.url}/v1/endpoints/${id}`, { key: cli.t.key })).status === 200;

async function newVolume(): Promise<string> {
  return (await call(`${cli.t.service.url}/v2/network-volumes`, { key: cli.t.key, body: { name: "models", size: 10, dataCenter: "local" } })).body.id;
}

describe("svc volume delete", () => {
  it("refuses without a terminal, naming --yes, and keeps the volume", async () => {
    const id = await newVolume();
    const r = await svc(["volume", "delete", id]);
    expect(r.code).toBe(ExitCode.usage);
    expect(r.stderr).toContain(`This deletes network volume "models" (${id}, 10 GB) and everything on it; nothing was changed`);
    expect(r.stderr).toContain("Pass --yes to confirm");
    expect(await volumeExists(id)).toBe(true);
  });

  it("refuses on a terminal too when CI is set", async () => {
    const id = await newVolume();
    const r = await svcOnTty(["volume", "delete", id], "y", { CI: "true" });
    expect(r.code).toBe(ExitCode.usage);
    expect(r.output).toContain("--yes");
    expect(r.output).not.toContain("[y/N]");
    expect(await volumeExists(id)).toBe(true);
  });

  it("asks on a terminal: anything but y cancels, y deletes", async () => {
    const id = await newVolume();
    const no = await svcOnTty(["volume", "delete", id], "n");
    expect(no.output).toContain(`This deletes network volume "models" (${id}, 10 GB) and everything on it. Continue? [y/N]`);
    expect(no.code).toBe(ExitCode.usage);
    expect(no.output).toContain("Cancelled; nothing was changed");
    expect(await volumeExists(id)).toBe(true);
    const yes = await svcOnTty(["volume", "delete", id], "y");
    expect(yes.code).toBe(0);
    expect(yes.output).toContain(`deleted network volume ${id}`);
    expect(await volumeExists(id)).toBe(false);
  });

  it("deletes at once with --yes", async () => {
    const id = await newVolume();
    const r = await svc(["volume", "delete", id, "--yes", "--json"], { CI: "true" });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ id, deleted: true });
    expect(await volumeExists(id)).toBe(false);
  });
});

describe("svc endpoint delete", () => {
  it("refuses without --yes and keeps the endpoint; deletes with it", async () => {
    const template = (await call(`${cli.t.service.url}/v1/templates`, { key: cli.t.key, body: { name: "img", imageName: "ubuntu:24.04" } })).body;
    const endpoint = (
      await call(`${cli.t.service.url}/v1/endpoints`, { key: cli.t.key, body: { name: "api", templateId: template.id, gpuTypeIds: ["ADA_24"], workersMax: 1 } })
    ).body;
    expect(endpoint.id).toEqual(expect.any(String));
    const refused = await svc(["endpoint", "delete", endpoint.id], { CI: "true" });
    expect(refused.code).toBe(ExitCode.usage);
    expect(refused.stderr).toContain(`This deletes endpoint "api" (${endpoint.id}) with its configuration, logs and job history; nothing was changed`);
    expect(refused.stderr).toContain("--yes");
    expect(await endpointExists(endpoint.id)).toBe(true);
    const done = await svc(["endpoint", "delete", endpoint.id, "--yes"]);
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`deleted endpoint ${endpoint.id}`);
    expect(await endpointExists(endpoint.id)).toBe(false);
  });
});

describe("svc keys revoke", () => {
  it("refuses without --yes and the key keeps working; revokes with it", async () => {
    const key = (await call(`${cli.t.service.url}/v1/keys`, { key: cli.t.key, body: { scopes: ["management:read"], name: "ci" } })).body;
    const works = async () => (await svc(["volume", "list", "--json"], { SVC_API_KEY: key.key })).code;
    expect(await works()).toBe(0);
    const refused = await svc(["keys", "revoke", key.id], { CI: "true" });
    expect(refused.code).toBe(ExitCode.usage);
    expect(refused.stderr).toContain(`This revokes API key ${key.id} ("ci")`);
    expect(refused.stderr).not.toContain("THE KEY THIS CLI USES");
    expect(refused.stderr).toContain("--yes");
    expect(await works()).toBe(0);
    // The list marks the key the CLI runs with; revoking that one says so. A wrong id fails before anything is asked.
    const listed = JSON.parse((await svc(["keys", "list", "--json"])).stdout) as Array<{ id: string; inUse: boolean }>;
    const mine = listed.filter((k) => k.inUse);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.id).not.toBe(key.id);
    const own = await svc(["keys", "revoke", mine[0]!.id], { CI: "true" });
    expect(own.code).toBe(ExitCode.usage);
    expect(own.stderr).toContain(`This revokes API key ${mine[0]!.id}, THE KEY THIS CLI USES (SVC_API_KEY)`);
    const wrong = await svc(["keys", "revoke", "keynope"], { CI: "true" });
    expect([wrong.code, wrong.stderr.includes("404 Not Found")]).toEqual([ExitCode.api, true]);
    const done = await svc(["keys", "revoke", key.id, "--yes"]);
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`revoked API key ${key.id}`);
    expect(await works()).toBe(ExitCode.api);
  });
});
