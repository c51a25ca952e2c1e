import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FileHasher } from "./hash-thread.js";

const dir = mkdtempSync(join(tmpdir(), "svc-hash-thread-"));
const hasher = new FileHasher();
afterAll(async () => {
  await hasher.close();
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Write `content` to `path` in `parts` steps, telling the job each time, as a download does. */
function writeInSteps(path: string, content: Buffer, parts: number, told: (bytes: number) => void): void {
  const step = Math.ceil(content.length / parts);
  writeFileSync(path, "");
  for (let at = 0; at < content.length; at += step) {
    appendFileSync(path, content.subarray(at, at + step));
    told(Math.min(at + step, content.length));
  }
}

describe("FileHasher", () => {
  it("hashes a file as it is written, to the digest of its bytes", async () => {
    const content = randomBytes(9 * 1024 * 1024 + 17); // past the thread's 4 MB reads
    const path = join(dir, "steps");
    const job = hasher.begin(path, { algorithm: "sha256" });
    writeInSteps(path, content, 7, (bytes) => job.written(bytes));
    expect(await job.finish(content.length)).toBe(sha256(content));
  });

  it("hashes a prefix before the bytes (a git blob id), and only the bytes it is told of", async () => {
    const content = Buffer.from('{"model_type": "bench"}');
    const path = join(dir, "blob");
    writeFileSync(path, Buffer.concat([content, Buffer.from("not yet counted")]));
    const job = hasher.begin(path, { algorithm: "sha1", prefix: `blob ${content.length}\0` });
    const gitBlobId = createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
    expect(await job.finish(content.length)).toBe(gitBlobId);
  });

  it("keeps several files' hashes apart", async () => {
    const contents = [randomBytes(3 * 1024 * 1024), randomBytes(5 * 1024 * 1024 + 1)];
    const jobs = contents.map((_, i) => hasher.begin(join(dir, `apart-${i}`), { algorithm: "sha256" }));
    for (const i of contents.keys()) writeFileSync(join(dir, `apart-${i}`), "");
    // Interleaved, as two downloads' batches land.
    for (let part = 0; part < 4; part++)
      for (const [i, c] of contents.entries()) {
        const step = Math.ceil(c.length / 4);
        appendFileSync(join(dir, `apart-${i}`), c.subarray(part * step, (part + 1) * step));
        jobs[i]!.written(Math.min((part + 1) * step, c.length));
      }
    expect(await Promise.all(jobs.map((j, i) => j.finish(contents[i]!.length)))).toEqual(contents.map(sha256));
  });

  it("gives the same digest when the thread is gone before the file is complete (hashed here instead)", async () => {
    const own = new FileHasher();
    const content = randomBytes(6 * 1024 * 1024);
    const path = join(dir, "thread-gone");
    const job = own.begin(path, { algorithm: "sha256" });
    writeInSteps(path, content, 3, (bytes) => job.written(bytes));
    await own.close();
    expect(await job.finish(content.length)).toBe(sha256(content));
  });

  it("gives the digest of what the file holds when it is shorter than told (the download's check refuses it)", async () => {
    const content = randomBytes(1024);
    const path = join(dir, "short");
    writeFileSync(path, content);
    const job = hasher.begin(path, { algorithm: "sha256" });
    const digest = await job.finish(4096);
    expect(digest).toBe(sha256(content));
    expect(digest).not.toBe(sha256(Buffer.concat([content, Buffer.alloc(3072)])));
  });

  it("starts again after its idle end, and after an abandoned job", async () => {
    const quick = new FileHasher(20);
    const path = join(dir, "again");
    const content = randomBytes(100_000);
    writeFileSync(path, content);
    const abandoned = quick.begin(path, { algorithm: "sha256" });
    abandoned.written(50_000);
    abandoned.abandon();
    await new Promise((r) => setTimeout(r, 100));
    const job = quick.begin(path, { algorithm: "sha256" });
    job.written(content.length);
    expect(await job.finish(content.length)).toBe(sha256(content));
    await quick.close();
  });
});
