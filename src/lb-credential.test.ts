import { timingSafeEqual } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { hashKey, newKey } from "./service/keys/auth.js";
import { credentialMatches, lbCredentialOfKeyHash, lbCredentialOfToken } from "./lb-credential.js";

// Watched, to see that the comparison is node's constant-time one and not `===` (which stops at the first byte
// that differs, so its timing tells an attacker how much of a guess was right).
vi.mock("node:crypto", async (original) => {
  const crypto = await original<typeof import("node:crypto")>();
  return { ...crypto, timingSafeEqual: vi.fn(crypto.timingSafeEqual) };
});

describe("lb credential", () => {
  it("is the same from a worker's token as from the hash the keys table holds of it, and differs between workers", () => {
    const token = newKey("svcw");
    const credential = lbCredentialOfToken(token);
    expect(lbCredentialOfKeyHash(hashKey(token))).toBe(credential);
    expect(lbCredentialOfToken(newKey("svcw"))).not.toBe(credential);
    // Not the stored hash itself, nor anything of the token: the value a worker receives proves nothing elsewhere.
    expect(credential).not.toContain(hashKey(token));
    expect(credential).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("matches only the exact value, one header, compared in constant time", () => {
    const credential = lbCredentialOfToken("svcw_a");
    const expected = Buffer.from(credential, "latin1");
    expect(credentialMatches(credential, expected)).toBe(true);
    expect(credentialMatches(undefined, expected)).toBe(false);
    expect(credentialMatches("", expected)).toBe(false);
    expect(credentialMatches(`${credential} `, expected)).toBe(false);
    expect(credentialMatches(credential.slice(0, -1), expected)).toBe(false);
    expect(credentialMatches(lbCredentialOfToken("svcw_b"), expected)).toBe(false);
    expect(credentialMatches(`${credential}, ${credential}`, expected)).toBe(false);
    expect(credentialMatches([credential], expected)).toBe(false);
    vi.mocked(timingSafeEqual).mockClear();
    const guess = `${credential.slice(0, 42)}x`;
    expect(credentialMatches(guess, expected)).toBe(false);
    expect(credentialMatches(credential, expected)).toBe(true);
    expect(vi.mocked(timingSafeEqual).mock.calls.map(([a, b]) => [Buffer.from(a as Buffer).toString(), Buffer.from(b as Buffer).toString()])).toEqual([
      [guess, credential],
      [credential, credential],
    ]);
  });
});
