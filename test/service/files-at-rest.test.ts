// The service's files at rest are its own, as `svc server` leaves them: the data directory 0700 (an older, looser
// one tightened at start), the SQLite database and its WAL and shared memory 0600, uploaded and deployed artifacts
// 0600, the admin key and the secrets key 0600, the volumes' root 0700. And the sealing key may live outside the
// data directory (SVC_SECRETS_KEY_FILE): then none is written in it, and the secrets are sealed with that one.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { keyId, parseKey } from "../../src/service/secrets/box.js";
import { openDatabase } from "../../src/service/store/driver.js";
import { startServerProcess, type ServerProcess } from "../server-process.js";
import { call, manifest, resource, startTestService } from "./helpers.js";

let work: string;
let server: ServerProcess | undefined;

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

async function tarGz(files: Record<string, string>): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const [name, text] of Object.entries(files)) pack.entry({ name }, text);
  pack.finalize();
  const parts: Buffer[] = [];
  for await (const chunk of pack) parts.push(chunk as Buffer);
  return gzipSync(Buffer.concat(parts));
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "svc-files-at-rest-"));
});
afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("svc server's data directory", () => {
  it("is 0700 with 0600 files: database, WAL, artifacts, admin and secrets keys; an older looser one is tightened", async () => {
    const dataDir = join(work, "data");
    // As an earlier version left it: world-readable directory, database and artifact.
    mkdirSync(join(dataDir, "artifacts"), { recursive: true, mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const old = join(dataDir, "artifacts", `${"a".repeat(64)}.tar.gz`);
    writeFileSync(old, "an older build", { mode: 0o644 });
    server = await startServerProcess({ dataDir, workers: "none" });
    const key = readFileSync(join(dataDir, "admin-key"), "utf8").trim();

    // An upload, and a secret (the database is written, its WAL in use).
    const body = await tarGz({ "svc_manifest.json": JSON.stringify(manifest({ echo: resource() }, "files")), "endpoints/echo/handler.mjs": "export {}" });
    const sha = createHash("sha256").update(body).digest("hex");
    const upload = await fetch(`${server.url}/v1/apps/files/builds`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "x-svc-sha256": sha },
      body,
    });
    expect(upload.status).toBe(201);
    expect((await call(`${server.url}/v1/secrets/HF_TOKEN`, { key, method: "PUT", body: { value: "hf_x" } })).status).toBe(201);

    expect(mode(dataDir)).toBe("700");
    expect(mode(join(dataDir, "svc.sqlite"))).toBe("600");
    for (const side of ["svc.sqlite-wal", "svc.sqlite-shm"])
      expect([side, existsSync(join(dataDir, side)) ? mode(join(dataDir, side)) : "absent"]).toEqual([side, "600"]);
    expect(mode(join(dataDir, "admin-key"))).toBe("600");
    expect(mode(join(dataDir, "secrets-key"))).toBe("600");
    expect(mode(join(dataDir, "artifacts"))).toBe("700");
    expect(mode(join(dataDir, "artifacts", `${sha}.tar.gz`))).toBe("600");
    expect(mode(old)).toBe("600");
    expect(mode(join(dataDir, "volumes"))).toBe("700");
    await server.stop();
  }, 60_000);
});

describe("the data directory of startService (svc dev, embedders)", () => {
  it("keeps a deployed artifact 0600 and a volume's root 0700, the volume itself usable by its workers", async () => {
    const t = await startTestService();
    try {
      await t.service.deploy({ app: "files", env: "dev", manifest: manifest({ echo: resource({ volume: "scratch" }) }, "files"), artifactPath: t.artifact });
      const dataDir = join(t.dir, "data");
      const artifact = join(dataDir, "artifacts", `${createHash("sha256").update(readFileSync(t.artifact)).digest("hex")}.tar.gz`);
      expect(mode(artifact)).toBe("600");
      expect(mode(dataDir)).toBe("700");
      const [volume] = (await call(`${t.service.url}/v2/network-volumes`, { key: t.key })).body as Array<{ id: string; name: string }>;
      expect(volume).toMatchObject({ name: "scratch" });
      expect(mode(join(dataDir, "volumes"))).toBe("700");
      expect(statSync(join(dataDir, "volumes", volume!.id)).isDirectory()).toBe(true);
    } finally {
      await t.close();
    }
  });
});

describe("SVC_SECRETS_KEY_FILE", () => {
  it("seals secrets with the key in that file, outside the data directory, and writes none into it", async () => {
    const dataDir = join(work, "data-keyfile");
    const keyFile = join(work, "keys", "secrets.key");
    server = await startServerProcess({ dataDir, workers: "none", env: { SVC_SECRETS_KEY_FILE: keyFile } });
    const key = readFileSync(join(dataDir, "admin-key"), "utf8").trim();
    expect((await call(`${server.url}/v1/secrets/HF_TOKEN`, { key, method: "PUT", body: { value: "hf_from_the_file" } })).status).toBe(201);
    await server.stop();
    // Made on the first start, the service's alone, and the only key: the data directory holds none.
    expect(mode(keyFile)).toBe("600");
    expect(existsSync(join(dataDir, "secrets-key"))).toBe(false);
    const db = openDatabase(join(dataDir, "svc.sqlite"), { readonly: true });
    const rows = db.prepare("SELECT name, key_id FROM secrets").all() as Array<{ name: string; key_id: string }>;
    db.close();
    expect(rows).toEqual([{ name: "HF_TOKEN", key_id: keyId(parseKey(readFileSync(keyFile, "utf8"), keyFile)) }]);

    // The next start reads the same file: the secret still opens (a rotation would say it re-sealed otherwise).
    server = await startServerProcess({ dataDir, workers: "none", env: { SVC_SECRETS_KEY_FILE: keyFile } });
    expect((await call(`${server.url}/v1/secrets`, { key })).body).toEqual([expect.objectContaining({ name: "HF_TOKEN" })]);
    expect(server.log()).not.toContain("sealed");
    expect(existsSync(join(dataDir, "secrets-key"))).toBe(false);
  }, 60_000);
});
