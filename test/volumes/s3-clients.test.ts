// The S3 client matrix against a real service on 127.0.0.1, each client with its defaults and only what a user
// sets (the key's id, secret, endpoint and region): boto3 (managed transfers, presigned URLs), presigned POST
// uploads (boto3's generate_presigned_post, posted with requests), rclone and s3cmd (which cannot put a path
// before the bucket, so they need the S3 API's own origin). The AWS CLI's own file is awscli.test.ts. A client
// that is not installed is skipped, naming what to install (.ci/run installs them).

import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runProgram } from "../cli-output.js";
import { call, startTestService, type TestService } from "../service/helpers.js";

const present = (program: string, args: string[]) => spawnSync(program, args, { stdio: "ignore" }).status === 0;
const hasBoto3 = present("python3", ["-c", "import boto3, requests"]);
const hasRclone = present("rclone", ["version"]);
const hasS3cmd = present("s3cmd", ["--version"]);
for (const [has, what] of [
  [hasBoto3, "python3 with boto3 and requests (pip install boto3 requests)"],
  [hasRclone, "rclone (apt-get install rclone)"],
  [hasS3cmd, "s3cmd (apt-get install s3cmd)"],
] as const) {
  if (!has) console.warn(`NOTICE: ${what} is missing; skipping its S3 client test`);
}

let t: TestService;
let scratch: string;
let volume: string;
let volumeDir: string;
let key: { accessKeyId: string; secretAccessKey: string; endpoint: string; region: string };

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** The environment a user gives an S3 client: the key, the region, a home of its own; nothing else. */
function clientEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: scratch,
    AWS_ACCESS_KEY_ID: key.accessKeyId,
    AWS_SECRET_ACCESS_KEY: key.secretAccessKey,
    AWS_DEFAULT_REGION: key.region,
    AWS_CONFIG_FILE: join(scratch, "no-aws-config"),
    AWS_SHARED_CREDENTIALS_FILE: join(scratch, "no-aws-credentials"),
    AWS_EC2_METADATA_DISABLED: "true",
    ...extra,
  };
}

/** Runs a Python program with the key in its environment; its stdout's last line as JSON. */
async function python(program: string, args: string[] = []): Promise<any> {
  const run = await runProgram("python3", ["-c", program, key.endpoint, volume, ...args], { cwd: scratch, env: clientEnv() });
  if (run.code !== 0) throw new Error(`python3 exited ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!);
}

beforeAll(async () => {
  t = await startTestService();
  scratch = mkdtempSync(join(tmpdir(), "svc-s3-clients-"));
  volume = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key, body: { name: "matrix", size: 10, dataCenter: "local" } })).body.id;
  volumeDir = join(t.dir, "data", "volumes", volume);
  key = (await call(`${t.service.url}/v1/volume-keys`, { key: t.key, body: {} })).body;
  expect(key.endpoint).toBe(t.service.s3!.url);
});
afterAll(async () => {
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("boto3", () => {
  it.skipIf(!hasBoto3)(
    "uploads (a managed transfer in parts too), lists, downloads, copies, deletes and presigns with its defaults",
    async () => {
      const big = randomBytes(12 * 1024 * 1024);
      writeFileSync(join(scratch, "big.bin"), big);
      const out = await python(
        `
import sys, json, urllib.request, boto3, requests
endpoint, bucket = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=endpoint)
s3.upload_file("big.bin", bucket, "boto/big.bin")  # 12 MiB: a multipart upload (8 MiB threshold)
s3.put_object(Bucket=bucket, Key="boto/small.txt", Body=b"small")
s3.copy_object(Bucket=bucket, Key="boto/copy.txt", CopySource={"Bucket": bucket, "Key": "boto/small.txt"})
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="boto/") for o in page.get("Contents", [])]
s3.download_file(bucket, "boto/big.bin", "big.back")
head = s3.head_object(Bucket=bucket, Key="boto/big.bin")
get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "boto/small.txt"}, ExpiresIn=300)
fetched = urllib.request.urlopen(get_url).read().decode()
put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "boto/presigned.txt"}, ExpiresIn=300)
put = requests.put(put_url, data=b"via a presigned PUT")
s3.delete_object(Bucket=bucket, Key="boto/copy.txt")
after = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="boto/").get("Contents", [])]
print(json.dumps({"keys": keys, "length": head["ContentLength"], "fetched": fetched, "getUrl": get_url, "put": put.status_code, "after": after}))
`,
      );
      expect(out.keys).toEqual(["boto/big.bin", "boto/copy.txt", "boto/small.txt"]);
      expect(out.length).toBe(big.length);
      expect(sha(readFileSync(join(scratch, "big.back")))).toBe(sha(big));
      expect(sha(readFileSync(join(volumeDir, "boto", "big.bin")))).toBe(sha(big));
      // Presigned URLs point at the S3 API's own origin, path-style.
      expect(new URL(out.getUrl).origin).toBe(new URL(t.service.s3!.url).origin);
      expect(new URL(out.getUrl).pathname).toBe(`/${volume}/boto/small.txt`);
      expect(out.fetched).toBe("small");
      expect(out.put).toBe(200);
      expect(readFileSync(join(volumeDir, "boto", "presigned.txt"), "utf8")).toBe("via a presigned PUT");
      expect(out.after).toEqual(["boto/big.bin", "boto/presigned.txt", "boto/small.txt"]);
    },
    120_000,
  );

  // boto3 signs forms (and presigned URLs) with Version 2 by default for us-east-1; Version 4 when configured.
  it.skipIf(!hasBoto3).each(["default", "s3v4"])(
    "posts forms made by generate_presigned_post (signature: %s), within the policy's conditions only",
    async (signature) => {
      writeFileSync(join(scratch, "photo.jpg"), "not really a jpeg, 30 bytes..");
      const out = await python(
        `
import sys, json, base64, boto3, requests
from botocore.config import Config
endpoint, bucket, signature = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=endpoint, config=None if signature == "default" else Config(signature_version=signature))
def form(key, conditions=None, fields=None, expires=300):
    # A copy: boto3 appends its own conditions to the list it is given.
    return s3.generate_presigned_post(bucket, key, Fields=fields, Conditions=list(conditions or []), ExpiresIn=expires)
def post(p, data=None, content=None, name="photo.jpg"):
    body = content if content is not None else open("photo.jpg", "rb").read()
    r = requests.post(p["url"], data=data if data is not None else p["fields"], files={"file": (name, body)})
    return {"status": r.status_code, "text": r.text, "etag": r.headers.get("etag")}
limited = [["starts-with", "$key", "uploads/"], ["content-length-range", 1, 100]]
res = {}
res["url"] = form("uploads/a.jpg")["url"]
res["plain"] = post(form("uploads/plain.jpg"))
res["filename"] = post(form("uploads/\${filename}", conditions=[["starts-with", "$key", "uploads/"]]), name="named.jpg")
res["status201"] = post(form("uploads/201.jpg", conditions=[{"success_action_status": "201"}], fields={"success_action_status": "201"}))
res["tooBig"] = post(form("uploads/big.jpg", conditions=limited), content=b"x" * 101)
res["tooSmall"] = post(form("uploads/empty.jpg", conditions=limited), content=b"")
p = form("uploads/\${filename}", conditions=[["starts-with", "$key", "uploads/"]])
res["outside"] = post(p, data={**p["fields"], "key": "elsewhere/x.jpg"})
p = form("uploads/extra.jpg")
res["extraField"] = post(p, data={**p["fields"], "x-amz-meta-owner": "mallory"})
p = form("uploads/tampered.jpg")
doc = json.loads(base64.b64decode(p["fields"]["policy"]))
doc["conditions"] = [c for c in doc["conditions"] if not (isinstance(c, dict) and "key" in c)] + [["starts-with", "$key", ""]]
res["tampered"] = post(p, data={**p["fields"], "key": "anywhere.jpg", "policy": base64.b64encode(json.dumps(doc).encode()).decode()})
res["expired"] = post(form("uploads/late.jpg", expires=-60))
res["fields"] = sorted(form("uploads/a.jpg")["fields"])
print(json.dumps(res))
`,
        [signature],
      );
      expect(out.fields).toEqual(
        signature === "default"
          ? ["AWSAccessKeyId", "key", "policy", "signature"]
          : ["key", "policy", "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature"],
      );
      expect(new URL(out.url).origin).toBe(new URL(t.service.s3!.url).origin);
      expect(out.plain).toMatchObject({ status: 204, text: "" });
      expect(out.plain.etag).toMatch(/^".+"$/);
      expect(readFileSync(join(volumeDir, "uploads", "plain.jpg"), "utf8")).toBe("not really a jpeg, 30 bytes..");
      expect(out.filename.status).toBe(204);
      expect(existsSync(join(volumeDir, "uploads", "named.jpg"))).toBe(true);
      expect(out.status201.status).toBe(201);
      expect(out.status201.text).toContain(`<Key>uploads/201.jpg</Key>`);
      expect(out.tooBig.status).toBe(400);
      expect(out.tooBig.text).toContain("<Code>EntityTooLarge</Code>");
      expect(out.tooSmall).toMatchObject({ status: 400, text: expect.stringContaining("<Code>EntityTooSmall</Code>") });
      expect(out.outside.status).toBe(403);
      expect(out.outside.text).toContain("Policy Condition failed");
      expect(out.extraField.status).toBe(403);
      expect(out.extraField.text).toContain("Extra input fields: x-amz-meta-owner");
      expect(out.tampered.status).toBe(403);
      expect(out.tampered.text).toContain("<Code>SignatureDoesNotMatch</Code>");
      expect(out.expired.status).toBe(403);
      expect(out.expired.text).toContain("Policy expired");
      // Nothing refused was written.
      for (const name of ["big.jpg", "empty.jpg", "extra.jpg", "late.jpg"]) expect(existsSync(join(volumeDir, "uploads", name))).toBe(false);
      expect(existsSync(join(volumeDir, "elsewhere"))).toBe(false);
      expect(existsSync(join(volumeDir, "anywhere.jpg"))).toBe(false);
      rmSync(join(volumeDir, "uploads"), { recursive: true });
    },
    60_000,
  );
});

it.skipIf(!hasRclone)(
  "rclone with its defaults: creates the (existing) bucket, copies, lists, reads, syncs back and deletes",
  async () => {
    const local = join(scratch, "rclone-up");
    mkdirSync(join(local, "nested"), { recursive: true });
    writeFileSync(join(local, "a.txt"), "alpha");
    writeFileSync(join(local, "nested", "b c.txt"), "b".repeat(50_000));
    // An empty configuration file: the remote is all in the environment.
    writeFileSync(join(scratch, "rclone.conf"), "");
    const env = clientEnv({
      RCLONE_CONFIG: join(scratch, "rclone.conf"),
      RCLONE_CONFIG_SVC_TYPE: "s3",
      RCLONE_CONFIG_SVC_PROVIDER: "Other",
      RCLONE_CONFIG_SVC_ENDPOINT: key.endpoint,
      RCLONE_CONFIG_SVC_ACCESS_KEY_ID: key.accessKeyId,
      RCLONE_CONFIG_SVC_SECRET_ACCESS_KEY: key.secretAccessKey,
    });
    const rclone = (args: string[]) => runProgram("rclone", [...args, "--retries", "1", "--low-level-retries", "1"], { cwd: scratch, env });
    const copied = await rclone(["copy", local, `svc:${volume}/rclone`]);
    expect(copied.stderr).toBe("");
    expect(copied.code).toBe(0);
    expect(readFileSync(join(volumeDir, "rclone", "nested", "b c.txt"), "utf8")).toBe("b".repeat(50_000));
    const listed = await rclone(["lsf", "-R", "--files-only", `svc:${volume}/rclone`]);
    expect(listed.stdout.trim().split("\n").sort()).toEqual(["a.txt", "nested/b c.txt"]);
    expect((await rclone(["cat", `svc:${volume}/rclone/a.txt`])).stdout).toBe("alpha");
    const back = join(scratch, "rclone-back");
    expect((await rclone(["sync", `svc:${volume}/rclone`, back])).code).toBe(0);
    expect(readFileSync(join(back, "nested", "b c.txt"), "utf8")).toBe("b".repeat(50_000));
    // Nothing changed: a second copy transfers nothing and says nothing.
    expect(await rclone(["copy", local, `svc:${volume}/rclone`])).toMatchObject({ code: 0, stderr: "" });
    expect((await rclone(["delete", `svc:${volume}/rclone/nested`])).code).toBe(0);
    expect(existsSync(join(volumeDir, "rclone", "nested", "b c.txt"))).toBe(false);
    expect(readFileSync(join(volumeDir, "rclone", "a.txt"), "utf8")).toBe("alpha");
  },
  120_000,
);

it.skipIf(!hasS3cmd)(
  "s3cmd with path-style addressing at the S3 origin's root: put, ls, get, sync, del",
  async () => {
    const host = new URL(key.endpoint).host;
    const config = join(scratch, "s3cfg");
    writeFileSync(
      config,
      [
        "[default]",
        `access_key = ${key.accessKeyId}`,
        `secret_key = ${key.secretAccessKey}`,
        `host_base = ${host}`,
        // No %(bucket)s: the bucket goes in the path.
        `host_bucket = ${host}`,
        "use_https = False",
        `bucket_location = ${key.region}`,
        "",
      ].join("\n"),
    );
    const s3cmd = (args: string[]) => runProgram("s3cmd", ["-c", config, ...args], { cwd: scratch, env: clientEnv() });
    writeFileSync(join(scratch, "notes.txt"), "s3cmd was here");
    const put = await s3cmd(["put", "notes.txt", `s3://${volume}/s3cmd/notes.txt`]);
    expect(put.stderr).toBe("");
    expect(put.code).toBe(0);
    expect(readFileSync(join(volumeDir, "s3cmd", "notes.txt"), "utf8")).toBe("s3cmd was here");
    const ls = await s3cmd(["ls", `s3://${volume}/s3cmd/`]);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain(`s3://${volume}/s3cmd/notes.txt`);
    const got = await s3cmd(["get", `s3://${volume}/s3cmd/notes.txt`, "notes.back"]);
    expect(got.code).toBe(0);
    expect(readFileSync(join(scratch, "notes.back"), "utf8")).toBe("s3cmd was here");
    mkdirSync(join(scratch, "s3cmd-dir", "sub"), { recursive: true });
    writeFileSync(join(scratch, "s3cmd-dir", "sub", "x.txt"), "x");
    expect((await s3cmd(["sync", "s3cmd-dir/", `s3://${volume}/s3cmd/dir/`])).code).toBe(0);
    expect(readFileSync(join(volumeDir, "s3cmd", "dir", "sub", "x.txt"), "utf8")).toBe("x");
    expect((await s3cmd(["del", `s3://${volume}/s3cmd/notes.txt`])).code).toBe(0);
    expect(existsSync(join(volumeDir, "s3cmd", "notes.txt"))).toBe(false);
  },
  120_000,
);
