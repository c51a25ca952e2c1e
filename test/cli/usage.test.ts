// `svc usage` against a real service: the jobs a run made, as JSON and as a table; a duration back from now is a time (--from 2h), a bad one is refused.
import { describe, expect, it } from "vitest";
import { cliAgainstTestService } from "../cli-output.js";
import { call, manifest, ProtocolWorker, resource } from "../service/helpers.js";

const cli = cliAgainstTestService("svc-usage-cli-");

describe("svc usage", () => {
  it("prints the hours' jobs per endpoint, as JSON and as a table", async () => {
    const { t } = cli;
    const [endpoint] = await t.service.deploy({ app: "bill", env: "prod", manifest: manifest({ b: resource() }, "bill"), artifactPath: t.artifact });
    for (let n = 0; n < 2; n++) expect((await call(`${endpoint!.url}/run`, { key: t.key, body: { input: { n } } })).status).toBe(200);
    const w = await ProtocolWorker.mint(t, endpoint!.id);
    await w.register();
    const jobs = await w.take(2);
    await w.done(jobs.map((j) => ({ jobId: j.id, lease: j.lease, status: "COMPLETED" as const, output: {} })));

    const json = await cli.svc(["usage", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const usage = JSON.parse(json.stdout);
    expect(usage.totals.jobs).toBe(2);
    expect(usage.hours).toEqual([expect.objectContaining({ userId: "default", endpointId: endpoint!.id, jobs: 2 })]);

    const text = await cli.svc(["usage"]);
    expect(text.code, text.stderr).toBe(0);
    // Headers in words, the endpoint by its name (the only user's usage: no user column).
    expect(text.stdout).toMatch(/^HOUR\s+ENDPOINT\s+GPU TYPE\s+WORKER SECONDS\s+GPU SECONDS\s+JOBS$/m);
    expect(text.stdout).toMatch(/\s+b\s+-\s+0\.0\s+0\.0\s+2$/m);
    expect(text.stdout).not.toContain(endpoint!.id);
    expect(text.stdout).toMatch(/total: 0\.0 worker-seconds, 0\.0 GPU-seconds, 2 jobs/);

    // A duration back from now, as --since takes it: the last two hours hold the jobs.
    const recent = await cli.svc(["usage", "--from", "2h", "--json"]);
    expect(recent.code, recent.stderr).toBe(0);
    expect(JSON.parse(recent.stdout).totals.jobs).toBe(2);

    // A value that is no time is the user's mistake, said before asking the service (exit 2).
    const bad = await cli.svc(["usage", "--from", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--from must be a duration back from now (10m, 2h, 1d), an ISO time or epoch milliseconds, not "yesterday"');
  }, 60_000);
});
