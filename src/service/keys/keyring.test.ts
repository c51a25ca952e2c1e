import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hashKey, KeyRing } from "./auth.js";
import { openSqliteStore } from "../store/sqlite.js";
import { SQLITE_MIGRATIONS } from "../schema/sqlite.js";

const dirs: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function ringWithKey(key: string, recheckMs: number) {
  const dir = mkdtempSync(join(tmpdir(), "svc-keyring-"));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, "svc.sqlite"), SQLITE_MIGRATIONS);
  await store.apply([{ op: "insertKey", key: { id: "k1", hash: hashKey(key), userId: "u1", scopes: ["admin"], createdAt: 0, revokedAt: null } }]);
  return { ring: new KeyRing(store, recheckMs), store };
}

describe("KeyRing", () => {
  it("accepts a known key at the last millisecond of its cached answer, even when the clock ticks during the call", async () => {
    const { ring, store } = await ringWithKey("svc_key_one", 500);
    const now = vi.spyOn(Date, "now").mockReturnValue(1_000);
    expect(await ring.authenticate("svc_key_one")).toMatchObject({ keyId: "k1" });
    // 499 ms later: still trusted. The clock moves on by a millisecond on every further reading.
    let t = 1_499;
    now.mockImplementation(() => t++);
    expect(await ring.authenticate("svc_key_one")).toMatchObject({ keyId: "k1" });
    await store.close();
  });

  it("asks the store again once the answer is older than recheckMs, and refuses a key revoked meanwhile", async () => {
    const { ring, store } = await ringWithKey("svc_key_two", 500);
    const now = vi.spyOn(Date, "now").mockReturnValue(1_000);
    expect(await ring.authenticate("svc_key_two")).toMatchObject({ keyId: "k1" });
    await store.apply([{ op: "revokeKey", id: "k1", at: 1_100 }]);
    now.mockReturnValue(1_400);
    expect(await ring.authenticate("svc_key_two")).toMatchObject({ keyId: "k1" });
    now.mockReturnValue(1_500);
    expect(await ring.authenticate("svc_key_two")).toBeUndefined();
    await store.close();
  });
});
