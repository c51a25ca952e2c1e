// The S3 API on network volumes with Debian's AWS CLI, unchanged (`aws s3 cp|sync|ls|rm|presign`), against a
// real service on 127.0.0.1: the user's volume access key in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the key's
// endpoint as --endpoint-url, nothing read from ~/.aws and nothing reached beyond the service.

import { spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { runProgram } from "../cli-output.js";
import { call, startTestService, type TestService } from "../service/helpers.js";

const hasAws = spawnSync("aws", ["--version"]).status === 0;
let t: TestService;
let scratch: string;
let volume: string;
let key: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };

/** `aws args...` with the volume key, in the scratch directory. */
function aws(args: string[], accessKey: { accessKeyId: string; secretAccessKey: string } = key) {
  return runProgram("aws", [...args, "--endpoint-url", key.endpoint], {
    cwd: scratch,
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      AWS_ACCESS_KEY_ID: accessKey.accessKeyId,
      AWS_SECRET_ACCESS_KEY: accessKey.secretAccessKey,
      AWS_DEFAULT_REGION: key.region,
      AWS_CONFIG_FILE: join(scratch, "aws-config"),
      AWS_SHARED_CREDENTIALS_FILE: join(scratch, "no-credentials"),
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_MAX_ATTEMPTS: "1",
    },
  });
}

beforeAll(async () => {
  if (!hasAws) return;
  t = await startTestService();
  scratch = mkdtempSync(join(tmpdir(), "svc-awscli-"));
  volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "weights", size: 10, dataCenter: "local" } })).body.id;
  key = (await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: {} })).body;
});
afterAll(async () => {
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it.skipIf(!hasAws)(
  "aws s3 cp up and down, ls, sync of a folder both ways, rm",
  async () => {
    writeFileSync(join(scratch, "config.json"), '{"layers": 2}');
    const up = await aws(["s3", "cp", "config.json", `s3://${volume}/models/tiny/config.json`]);
    expect(up.stderr).toBe("");
    expect(up.code).toBe(0);
    const volumeDir = join(t.dir, "data", "volumes", volume);
    expect(readFileSync(join(volumeDir, "models", "tiny", "config.json"), "utf8")).toBe('{"layers": 2}');

    mkdirSync(join(scratch, "local", "nested"), { recursive: true });
    writeFileSync(join(scratch, "local", "a.txt"), "a");
    writeFileSync(join(scratch, "local", "nested", "b with space.txt"), "b".repeat(10_000));
    const synced = await aws(["s3", "sync", "local", `s3://${volume}/synced`]);
    expect(synced.code).toBe(0);
    expect(readFileSync(join(volumeDir, "synced", "nested", "b with space.txt"), "utf8")).toBe("b".repeat(10_000));
    // Nothing changed: a second sync uploads nothing.
    const again = await aws(["s3", "sync", "local", `s3://${volume}/synced`]);
    expect(again).toMatchObject({ code: 0, stdout: "" });

    const top = await aws(["s3", "ls", `s3://${volume}/`]);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/PRE models\/\n/);
    expect(top.stdout).toMatch(/PRE synced\/\n/);
    const recursive = await aws(["s3", "ls", "--recursive", `s3://${volume}/`]);
    expect(
      recursive.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(/\s+/).slice(2).join(" ")),
    ).toEqual(["13 models/tiny/config.json", "1 synced/a.txt", "10000 synced/nested/b with space.txt"]);
    const buckets = await aws(["s3", "ls"]);
    expect(buckets.stdout).toContain(volume);

    const down = await aws(["s3", "sync", `s3://${volume}/synced`, "copy"]);
    expect(down.code).toBe(0);
    expect(readFileSync(join(scratch, "copy", "nested", "b with space.txt"), "utf8")).toBe("b".repeat(10_000));
    const one = await aws(["s3", "cp", `s3://${volume}/models/tiny/config.json`, "back.json"]);
    expect(one.code).toBe(0);
    expect(readFileSync(join(scratch, "back.json"), "utf8")).toBe('{"layers": 2}');

    // AWS CLI v1 presigns with Signature Version 2 by default, with Version 4 when told s3v4: both are served.
    for (const config of ["", "[default]\ns3 =\n    signature_version = s3v4\n"]) {
      writeFileSync(join(scratch, "aws-config"), config);
      const presigned = await aws(["s3", "presign", `s3://${volume}/models/tiny/config.json`, "--expires-in", "300"]);
      expect(presigned.code).toBe(0);
      expect(new URL(presigned.stdout.trim()).searchParams.has(config ? "X-Amz-Signature" : "Signature")).toBe(true);
      const fetched = await fetch(presigned.stdout.trim());
      expect(fetched.status).toBe(200);
      expect(await fetched.text()).toBe('{"layers": 2}');
    }

    const removed = await aws(["s3", "rm", "--recursive", `s3://${volume}/synced`]);
    expect(removed.code).toBe(0);
    expect(existsSync(join(volumeDir, "synced", "a.txt"))).toBe(false);
  },
  120_000,
);

it.skipIf(!hasAws)(
  "refuses a wrong secret and a write past the volume's size",
  async () => {
    const wrong = await aws(["s3", "ls", `s3://${volume}/`], { accessKeyId: key.accessKeyId, secretAccessKey: "x".repeat(40) });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain("SignatureDoesNotMatch");
    // As a worker would, fill the volume's directory to 5 bytes short of its 10 GB (a sparse file: nothing is
    // written to disk); the service sees it once it measures again (within a few seconds).
    const volumeDir = join(t.dir, "data", "volumes", volume);
    const filler = join(volumeDir, "filler.bin");
    closeSync(openSync(filler, "w"));
    truncateSync(filler, 10 * 1024 ** 3 - 13 - 5);
    await new Promise((r) => setTimeout(r, 3100));
    writeFileSync(join(scratch, "ten.bin"), "0123456789abcdefghij");
    const refused = await aws(["s3", "cp", "ten.bin", `s3://${volume}/ten.bin`]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("EntityTooLarge");
    expect(existsSync(join(volumeDir, "ten.bin"))).toBe(false);
    rmSync(filler);
  },
  60_000,
);
