import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyId, loadSecretKeys, parseKey, SecretBox } from "./box.js";

const A = Buffer.alloc(32, 7);
const B = Buffer.alloc(32, 9);

describe("SecretBox", () => {
  it("opens what it sealed, only for the same row, and never with a tampered value", () => {
    const box = new SecretBox({ current: A, previous: [] });
    const { sealed, keyId: id } = box.seal("s3cret", "u\u0000app\u0000prod\u0000HF_TOKEN");
    expect(sealed.includes(Buffer.from("s3cret"))).toBe(false);
    expect(box.open(sealed, id, "u\u0000app\u0000prod\u0000HF_TOKEN")).toBe("s3cret");
    expect(box.open(sealed, id, "other\u0000app\u0000prod\u0000HF_TOKEN")).toBeUndefined();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(box.open(tampered, id, "u\u0000app\u0000prod\u0000HF_TOKEN")).toBeUndefined();
    // Two seals of one value differ (fresh IV).
    expect(box.seal("s3cret", "x").sealed.equals(box.seal("s3cret", "x").sealed)).toBe(false);
  });

  it("opens values sealed with a previous key; without it they do not open", () => {
    const old = new SecretBox({ current: A, previous: [] }).seal("v", "row");
    const rotated = new SecretBox({ current: B, previous: [A] });
    expect(rotated.currentId).toBe(keyId(B));
    expect(rotated.open(old.sealed, old.keyId, "row")).toBe("v");
    expect(new SecretBox({ current: B, previous: [] }).open(old.sealed, old.keyId, "row")).toBeUndefined();
  });

  it("reads keys as base64 or hex of 32 bytes, and makes a 0600 key file when none is configured", () => {
    expect(parseKey(A.toString("base64"), "x").equals(A)).toBe(true);
    expect(parseKey(A.toString("hex"), "x").equals(A)).toBe(true);
    expect(() => parseKey("short", "SVC_SECRETS_KEY")).toThrow(/SVC_SECRETS_KEY is not a secrets key: it must be 32 bytes/);
    const dir = mkdtempSync(join(tmpdir(), "svc-box-"));
    try {
      const first = loadSecretKeys(dir);
      expect(statSync(join(dir, "secrets-key")).mode & 0o777).toBe(0o600);
      expect(loadSecretKeys(dir).current.equals(first.current)).toBe(true);
      expect(loadSecretKeys(dir, { current: B.toString("base64") }).current.equals(B)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
