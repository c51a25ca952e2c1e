// `svc volume|template|endpoint|keys` as a user runs them (compiled: node bin/svc.js; most through its entry point
// in the test's process) against a real service: --json results on stdout, human tables otherwise, and API
// problems (detail and each `errors` entry) on stderr with the API exit code.

import { expect, it } from "vitest";
import { cliAgainstTestService } from "../cli-output.js";
import { ExitCode } from "../../src/errors.js";
import { call } from "../service/helpers.js";

const cli = cliAgainstTestService("svc-mgmt-cli-");
/**
 * `svc args...` with the service's admin key, or with `key`: the CLI's entry point in this process (what each
 * command prints and its exit code). The binary runs the commands that read standard input, and the first volume's
 * create and list.
 */
const svc = (args: string[], key?: string) => cli.inProcess(args, key === undefined ? {} : { SVC_API_KEY: key });

it("creates, lists, gets, updates and deletes volumes", async () => {
  const created = await cli.svc(["volume", "create", "--name", "models", "--size", "40", "--json"]);
  expect(created.code).toBe(0);
  const volume = JSON.parse(created.stdout);
  expect(volume).toEqual({ id: expect.stringMatching(/^vol/), name: "models", size: 40, dataCenter: "local", type: "STANDARD" });

  const list = await cli.svc(["volume", "list"]);
  expect(list.stdout).toMatch(/^ID\s+NAME\s+SIZE\s+DATA CENTER\s+TYPE$/m);
  expect(list.stdout).toMatch(new RegExp(`^${volume.id}\\s+models\\s+40 GB\\s+local\\s+STANDARD$`, "m"));
  // Sizes with their units for a person; the API's numbers under --json.
  expect((await svc(["volume", "get", volume.id])).stdout).toMatch(/^size\s+40 GB$[\s\S]*^used\s+0 B$/m);
  expect(JSON.parse((await svc(["volume", "get", volume.id, "--json"])).stdout)).toEqual({ ...volume, usedBytes: 0 });
  // By name too, as cp, ls, rm and keys take it.
  expect(JSON.parse((await svc(["volume", "get", "models", "--json"])).stdout)).toEqual({ ...volume, usedBytes: 0 });
  const grown = JSON.parse((await svc(["volume", "update", volume.id, "--size", "80", "--name", "big", "--json"])).stdout);
  expect(grown).toMatchObject({ id: volume.id, size: 80, name: "big" });

  // An empty volume shrinks; below its size's minimum is the flag's error.
  expect(JSON.parse((await svc(["volume", "update", volume.id, "--size", "20", "--json"])).stdout)).toMatchObject({ id: volume.id, size: 20 });
  const shrink = await svc(["volume", "update", volume.id, "--size", "5"]);
  expect(shrink.code).toBe(ExitCode.api);
  expect(shrink.stderr).toContain("422 Unprocessable Entity: The network volume update is not valid");
  expect(shrink.stderr).toContain("- --size ($.size): must be at least 10");
  const bad = await svc(["volume", "create", "--name", "", "--size", "5", "--data-center", "moon"]);
  expect(bad.code).toBe(ExitCode.api);
  // Each error names the flag that set the field.
  expect(bad.stderr).toContain("- --name ($.name): must not be empty");
  expect(bad.stderr).toContain("- --size ($.size): must be at least 10");
  expect(bad.stderr).toContain('- --data-center ($.dataCenter): unknown data center "moon" (known: local)');
  expect((await svc(["volume", "create", "--name", "x", "--size", "ten"])).code).toBe(ExitCode.usage);

  // A name two volumes share is refused, not guessed.
  // Made through the REST API, which (as the provider's) allows a name twice; `svc volume create` refuses it.
  const twin = (await call(`${cli.t.service.url}/v2/network-volumes`, { key: cli.t.key, body: { name: "big", size: 10, dataCenter: "local" } })).body;
  const ambiguous = await svc(["volume", "delete", "big", "--yes"]);
  expect(ambiguous.code).toBe(ExitCode.user);
  expect(ambiguous.stderr).toContain(`2 network volumes are named "big" (${volume.id}, ${twin.id})`);
  expect(JSON.parse((await svc(["volume", "delete", twin.id, "--yes", "--json"])).stdout)).toEqual({ id: twin.id, deleted: true });
  expect(JSON.parse((await svc(["volume", "update", "big", "--size", "30", "--json"])).stdout)).toMatchObject({ id: volume.id, size: 30 });

  expect(JSON.parse((await svc(["volume", "delete", volume.id, "--yes", "--json"])).stdout)).toEqual({ id: volume.id, deleted: true });
  const missing = await svc(["volume", "get", volume.id]);
  expect(missing.code).toBe(ExitCode.api);
  expect(missing.stderr).toContain("404 Not Found");
}, 60_000);

it("creates templates and endpoints, shows why an endpoint waits, updates and deletes it", async () => {
  const template = JSON.parse((await svc(["template", "create", "--name", "img", "--image", "ubuntu:24.04", "--env", "A=1", "--json"])).stdout);
  expect(template).toMatchObject({ name: "img", imageName: "ubuntu:24.04", env: { A: "1" } });
  expect((await svc(["template", "list"])).stdout).toContain(template.id);

  const created = await svc(["endpoint", "create", "--name", "api", "--template", template.id, "--gpu", "ADA_24,AMPERE_48", "--workers-max", "2", "--json"]);
  expect(created.code).toBe(0);
  const endpoint = JSON.parse(created.stdout);
  expect(endpoint).toMatchObject({
    name: "api",
    gpuTypeIds: ["ADA_24", "AMPERE_48"],
    workersMax: 2,
    status: "WAITING",
    url: `${cli.t.service.url}/v2/${endpoint.id}`,
  });
  expect(created.stderr).toContain("none of the GPU types ADA_24, AMPERE_48 is available on this host");
  expect((await svc(["endpoint", "list"])).stdout).toMatch(new RegExp(`${endpoint.id}\\s+api\\s+WAITING`));
  const updated = JSON.parse((await svc(["endpoint", "update", endpoint.id, "--idle-timeout", "30", "--json"])).stdout);
  expect(updated).toMatchObject({ id: endpoint.id, idleTimeout: 30, scalerType: "QUEUE_DELAY", scalerValue: 4 });
  const scaled = JSON.parse((await svc(["endpoint", "update", endpoint.id, "--scaler-type", "request_count", "--scaler-value", "2", "--json"])).stdout);
  expect(scaled).toMatchObject({ id: endpoint.id, scalerType: "REQUEST_COUNT", scalerValue: 2 });
  const unknownPolicy = await svc(["endpoint", "update", endpoint.id, "--scaler-type", "soon"]);
  expect(unknownPolicy.code).toBe(ExitCode.usage);
  expect(unknownPolicy.stderr).toContain('--scaler-type must be QUEUE_DELAY or REQUEST_COUNT, not "soon"');
  const wrong = await svc(["endpoint", "update", endpoint.id, "--workers-min", "5"]);
  expect(wrong.code).toBe(ExitCode.api);
  expect(wrong.stderr).toContain("- --workers-min ($.workersMin): must not exceed workersMax (2)");
  expect((await svc(["endpoint", "delete", endpoint.id, "--yes"])).stdout).toContain(`deleted endpoint ${endpoint.id}`);
  expect((await svc(["endpoint", "get", endpoint.id])).code).toBe(ExitCode.api);
}, 60_000);

it("creates, lists and revokes keys; a revoked key is refused", async () => {
  const created = await svc(["keys", "create", "--scope", "management:read", "--name", "ci", "--json"]);
  const key = JSON.parse(created.stdout);
  expect(key).toMatchObject({ name: "ci", userId: "default", scopes: ["management:read"], key: expect.stringMatching(/^svc_/) });
  expect((await svc(["volume", "list", "--json"], key.key)).code).toBe(0);
  const forbidden = await svc(["volume", "create", "--name", "n", "--size", "10"], key.key);
  expect(forbidden.code).toBe(ExitCode.api);
  expect(forbidden.stderr).toContain("403 Forbidden");
  const list = await svc(["keys", "list"]);
  expect(list.stdout).toMatch(new RegExp(`${key.id}\\s+ci\\s+default\\s+management:read`));
  expect(list.stdout).not.toContain(key.key);
  expect((await svc(["keys", "revoke", key.id, "--yes"])).stdout).toContain(`revoked API key ${key.id}`);
  const refused = await svc(["volume", "list"], key.key);
  expect(refused.code).toBe(ExitCode.api);
  expect(refused.stderr).toContain("401 Unauthorized");
}, 60_000);

it("keeps the API's epoch-millisecond key times under --json and prints them relative in the list, exact and relative for one key", async () => {
  // 90 minutes: "in 1h" whether the list runs at once or seconds later.
  const created = JSON.parse((await svc(["keys", "create", "--scope", "jobs:*", "--name", "timed", "--expires-in", "5400", "--json"])).stdout);
  expect(created.createdAt).toEqual(expect.any(Number));
  expect(created.expiresAt).toBe(created.createdAt + 5_400_000);
  expect(created.revokedAt).toBeNull();
  const list = await svc(["keys", "list"]);
  expect(list.stdout).toMatch(/^ID\s+NAME\s+USER ID\s+SCOPES\s+CREATED\s+EXPIRES\s+REVOKED\s+IN USE$/m);
  expect(list.stdout).toMatch(new RegExp(`${created.id}\\s+timed\\s+default\\s+jobs:\\*\\s+(just now|\\d+s ago)\\s+in 1h\\s+-`));
  const shown = await svc(["keys", "create", "--scope", "jobs:*", "--name", "shown", "--expires-in", "5400"]);
  expect(shown.stdout).toMatch(/^expiresAt\s+\d{4}-\d\d-\d\dT[\d:.]+Z \(in 1h\)$/m);
}, 60_000);

it("stores registry credentials (the password from standard input), names them in a template, refuses to delete them while it does", async () => {
  const created = await cli.svc(["registry-auth", "create", "--name", "hub", "--username", "me", "--json"], {}, "pa55word\n");
  expect(created.code).toBe(0);
  const auth = JSON.parse(created.stdout);
  expect(auth).toEqual({ id: expect.stringMatching(/^cra/), name: "hub" });
  const list = await svc(["registry-auth", "list"]);
  expect(list.stdout).toMatch(new RegExp(`^${auth.id}\\s+hub$`, "m"));
  expect(list.stdout + created.stdout + created.stderr).not.toContain("pa55word");
  const template = JSON.parse(
    (await svc(["template", "create", "--name", "private", "--image", "127.0.0.1:5000/w:1", "--registry-auth", auth.id, "--json"])).stdout,
  );
  expect(template.containerRegistryAuthId).toBe(auth.id);
  const refused = await svc(["registry-auth", "delete", auth.id, "--yes"]);
  expect(refused.code).toBe(ExitCode.api);
  expect(refused.stderr).toContain(`409 Conflict: Container registry auth ${auth.id} is used by template(s) ${template.id}`);
  const empty = await cli.svc(["registry-auth", "create", "--name", "x", "--username", "me"], {}, "");
  expect(empty.code).toBe(ExitCode.usage);
  expect(empty.stderr).toContain("The password is empty; nothing was changed");
}, 180_000);
