// `svc volume keys|cp|ls|rm` as a user runs them (compiled: node bin/svc.js, build first; most through its entry
// point in the test's process) against a real service: keys print what S3 clients need; files go up and come
// back through the S3 API with the CLI's own API key; another user's volume is refused.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { cliAgainstTestService } from "../cli-output.js";
import { call } from "../service/helpers.js";
import { ExitCode } from "../../src/errors.js";

const cli = cliAgainstTestService("svc-volume-files-cli-");
/**
 * The CLI's entry point in this process (what each command prints and its exit code); the binary runs the first
 * copy up, whose stderr must say which service it talks to and nothing else.
 */
const svc = (args: string[], key?: string) => cli.inProcess(args, key === undefined ? {} : { SVC_API_KEY: key });

it("svc volume keys create --json prints accessKeyId, secretAccessKey, endpoint and region; list and revoke", async () => {
  const volume = JSON.parse((await svc(["volume", "create", "--name", "keys-vol", "--size", "10", "--json"])).stdout);
  const created = await svc(["volume", "keys", "create", "--read-only", "--name", "ci", "--volume", volume.id, "--json"]);
  expect(created.code).toBe(0);
  const key = JSON.parse(created.stdout);
  expect(key).toMatchObject({
    accessKeyId: expect.stringMatching(/^[A-Z0-9]{20}$/),
    secretAccessKey: expect.any(String),
    endpoint: cli.t.service.s3!.url,
    region: "us-east-1",
    readOnly: true,
    volumeIds: [volume.id],
    name: "ci",
  });
  const listed = await svc(["volume", "keys", "list"]);
  expect(listed.stdout).toContain(key.accessKeyId);
  expect(listed.stdout).not.toContain(key.secretAccessKey);
  const revoked = await svc(["volume", "keys", "revoke", key.accessKeyId, "--yes", "--json"]);
  expect(JSON.parse(revoked.stdout)).toMatchObject({ accessKeyId: key.accessKeyId, revokedAt: expect.any(Number) });
});

it("svc volume cp up and back (a file, a folder), ls (one level, --recursive, --json), rm", async () => {
  await svc(["volume", "create", "--name", "models", "--size", "10", "--json"]);
  const cwd = cli.cwd;
  writeFileSync(join(cwd, "weights.bin"), "weights");
  mkdirSync(join(cwd, "tokenizer", "extra"), { recursive: true });
  writeFileSync(join(cwd, "tokenizer", "vocab.txt"), "a b c");
  writeFileSync(join(cwd, "tokenizer", "extra", "merges.txt"), "ab");

  const up = await cli.svc(["volume", "cp", "weights.bin", "models:llama/"]);
  // stderr says which service it talks to, and nothing else.
  expect(up.stderr).toMatch(/^service: http:\/\/127\.0\.0\.1:\d+ \(SVC_API_URL\)\n$/);
  expect(up.code).toBe(0);
  expect(up.stdout).toContain("weights.bin -> models:llama/weights.bin (7 bytes)");
  expect((await svc(["volume", "cp", "tokenizer", "models:llama/tokenizer"])).code).not.toBe(0);
  expect((await svc(["volume", "cp", "-r", "tokenizer", "models:llama/tokenizer", "--json"])).code).toBe(0);

  const top = await svc(["volume", "ls", "models"]);
  expect(top.stdout).toMatch(/PRE llama\//);
  const one = JSON.parse((await svc(["volume", "ls", "models:llama/", "--json"])).stdout);
  expect(one).toEqual({ objects: [expect.objectContaining({ key: "llama/weights.bin", size: 7 })], folders: ["llama/tokenizer/"] });
  const all = JSON.parse((await svc(["volume", "ls", "models", "--recursive", "--json"])).stdout);
  expect(all.objects.map((o: { key: string }) => o.key)).toEqual(["llama/tokenizer/extra/merges.txt", "llama/tokenizer/vocab.txt", "llama/weights.bin"]);

  expect((await svc(["volume", "cp", "models:llama/weights.bin", "back.bin"])).code).toBe(0);
  expect(readFileSync(join(cwd, "back.bin"), "utf8")).toBe("weights");
  expect((await svc(["volume", "cp", "-r", "models:llama/tokenizer", "tok-copy"])).code).toBe(0);
  expect(readFileSync(join(cwd, "tok-copy", "extra", "merges.txt"), "utf8")).toBe("ab");

  const rm = await svc(["volume", "rm", "models:llama/weights.bin"]);
  expect(rm).toMatchObject({ code: 0, stdout: "deleted models:llama/weights.bin\n" });
  const again = await svc(["volume", "rm", "models:llama/weights.bin"]);
  expect(again.code).toBe(ExitCode.user);
  expect(again.stderr).toContain("No file llama/weights.bin in volume models");
  expect((await svc(["volume", "rm", "-r", "models:llama/tokenizer", "--yes"])).code).toBe(0);
  expect(JSON.parse((await svc(["volume", "ls", "models", "--recursive", "--json"])).stdout).objects).toEqual([]);
  // Thirteen runs of the svc binary, each a Node start: minutes on a loaded 2-core machine.
}, 180_000);

it("another user's volume is refused (403 AccessDenied) even by id", async () => {
  const mine = JSON.parse((await svc(["volume", "create", "--name", "private", "--size", "10", "--json"])).stdout);
  const other = (await cli.t.service.mintKey({ scopes: ["admin"], userId: "other-user" })).key;
  // By name it is not theirs to find; by id the S3 API refuses it.
  const byName = await svc(["volume", "ls", "private"], other);
  expect(byName.code).toBe(ExitCode.user);
  const response = await call(`${cli.t.service.url}/s3/${mine.id}?list-type=2`, { key: other });
  expect(response.status).toBe(403);
  expect(response.text).toContain("<Code>AccessDenied</Code>");
});

it("svc volume keys create --volume takes a volume's name, as cp, ls and rm do", async () => {
  const volume = JSON.parse((await svc(["volume", "create", "--name", "named-for-key", "--size", "10", "--json"])).stdout);
  const created = await svc(["volume", "keys", "create", "--volume", "named-for-key", "--json"]);
  expect(created.code, created.stderr).toBe(0);
  expect(JSON.parse(created.stdout).volumeIds).toEqual([volume.id]);
  const missing = await svc(["volume", "keys", "create", "--volume", "no-such-volume", "--json"]);
  expect(missing.code).toBe(ExitCode.user);
  expect(JSON.parse(missing.stderr).error.message).toBe('No network volume "no-such-volume" among yours');
});

it("a volume name that two volumes share is refused, naming their ids, rather than one of them picked", async () => {
  const a = JSON.parse((await svc(["volume", "create", "--name", "twin", "--size", "10", "--json"])).stdout);
  // The CLI refuses a second volume of one name; the REST API, as the provider's, does not (a script, the console).
  const b = (await call(`${cli.t.service.url}/v2/network-volumes`, { key: cli.t.key, body: { name: "twin", size: 10, dataCenter: "local" } })).body;
  writeFileSync(join(cli.cwd, "twin.txt"), "x");
  const up = await svc(["volume", "cp", "twin.txt", "twin:twin.txt", "--json"]);
  expect(up.code).toBe(ExitCode.user);
  const error = JSON.parse(up.stderr).error;
  expect(error.message).toBe(`2 network volumes are named "twin" (${a.id}, ${b.id})`);
  expect(error.hint).toContain("by id");
  // By id, each is reached.
  expect((await svc(["volume", "cp", "twin.txt", `${b.id}:twin.txt`])).code).toBe(0);
});

it("svc volume cp of a file the volume does not have says so (and a folder without -r says to use it)", async () => {
  await svc(["volume", "create", "--name", "sparse", "--size", "10", "--json"]);
  writeFileSync(join(cli.cwd, "one.txt"), "1");
  expect((await svc(["volume", "cp", "one.txt", "sparse:dir/one.txt"])).code).toBe(0);
  const missing = await svc(["volume", "cp", "sparse:nothere.bin", "back.bin", "--json"]);
  expect(missing.code).toBe(ExitCode.user);
  expect(JSON.parse(missing.stderr).error).toEqual({
    message: "No file nothere.bin in volume sparse",
    hint: "See what it holds with `svc volume ls sparse`.",
    exitCode: ExitCode.user,
  });
  const folder = await svc(["volume", "cp", "sparse:dir", "back-dir", "--json"]);
  expect(folder.code).toBe(ExitCode.user);
  expect(JSON.parse(folder.stderr).error).toMatchObject({ message: "sparse:dir is a folder", hint: "Copy it with --recursive." });
});

it("svc volume create refuses a name the user already has (a deploy's volume too), or reuses it with --reuse; --size defaults to a deploy's 10 GB", async () => {
  // Without --size: the size a deploy gives the volumes it creates.
  const first = await svc(["volume", "create", "--name", "weights", "--json"]);
  expect(first.code, first.stderr).toBe(0);
  const volume = JSON.parse(first.stdout);
  expect(volume).toMatchObject({ name: "weights", size: 10 });

  const again = await svc(["volume", "create", "--name", "weights", "--size", "10"]);
  expect(again.code).toBe(ExitCode.user);
  expect(again.stdout).toBe("");
  expect(again.stderr).toContain(`You already have a network volume named "weights" (${volume.id}, 10 GB); nothing was created`);
  expect(again.stderr).toContain("--reuse");

  const reused = await svc(["volume", "create", "--name", "weights", "--reuse", "--json"]);
  expect(reused.code, reused.stderr).toBe(0);
  expect(JSON.parse(reused.stdout)).toMatchObject({ id: volume.id, name: "weights" });
  const named = JSON.parse((await svc(["volume", "list", "--json"])).stdout).filter((v: { name: string }) => v.name === "weights");
  expect(named).toHaveLength(1);
  // Still one volume of that name: cp and ls take it.
  writeFileSync(join(cli.cwd, "w.txt"), "w");
  expect((await svc(["volume", "cp", "w.txt", "weights:w.txt"])).code).toBe(0);
});

it("a mistyped volume name is refused with the name meant", async () => {
  await svc(["volume", "create", "--name", "checkpoints", "--json"]);
  const ls = await svc(["volume", "ls", "chekpoints"]);
  expect(ls.code).toBe(ExitCode.user);
  expect(ls.stderr).toContain('No network volume "chekpoints" among yours; did you mean "checkpoints"?');
  const get = await svc(["volume", "get", "checkpoint"]);
  expect(get.code).toBe(ExitCode.user);
  expect(get.stderr).toContain('did you mean "checkpoints"?');
});
