// Secret values at rest: AES-256-GCM under the service's secrets key, bound to the row they belong to (the
// user, scope and name are the additional data, so a sealed value copied to another row does not open). A sealed
// value names its key by id, so keys can rotate: new values use the current key, older ones open with a previous
// key until they are sealed again (at start, see Secrets.rotate).

import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { UserError } from "../../errors.js";

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
export const SECRETS_KEY_FILE = "secrets-key";

export interface SecretKeys {
  current: Buffer;
  /** Keys values may still be sealed with (after a rotation). */
  previous: Buffer[];
}

/** A key's id: not secret, stored beside each value it sealed. */
export function keyId(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/** A key given as text (base64 or hex of 32 bytes): its bytes, or an error naming where it came from. */
export function parseKey(text: string, from: string): Buffer {
  const t = text.trim();
  const bytes = /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, "hex") : Buffer.from(t, "base64");
  if (bytes.length !== KEY_BYTES) {
    throw new UserError(`${from} is not a secrets key: it must be 32 bytes, in base64 or hex`, { hint: "Make one with `openssl rand -base64 32`." });
  }
  return bytes;
}

/**
 * The keys from the service's configuration. Without a current key: the one kept in `file` when given (a path
 * outside the data directory, so that a copy of the data directory, such as a backup, does not hold the key that
 * opens its secrets), else in `<dataDir>/secrets-key`; made on the first start (mode 0600), so a single box works
 * with no setting.
 */
export function loadSecretKeys(dataDir: string, configured?: { current?: string; previous?: string[]; file?: string }): SecretKeys {
  const previous = (configured?.previous ?? []).filter(Boolean).map((k, i) => parseKey(k, `previous secrets key #${i + 1}`));
  if (configured?.current && configured.file) {
    throw new UserError("The secrets key is given twice: SVC_SECRETS_KEY and SVC_SECRETS_KEY_FILE", {
      hint: "Give the key itself or the file holding it, not both.",
    });
  }
  if (configured?.current) return { current: parseKey(configured.current, "the secrets key"), previous };
  const file = configured?.file ? resolve(configured.file) : join(dataDir, SECRETS_KEY_FILE);
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, `${randomBytes(KEY_BYTES).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  }
  return { current: parseKey(readFileSync(file, "utf8"), file), previous };
}

export class SecretBox {
  readonly currentId: string;
  private readonly byId = new Map<string, Buffer>();

  constructor(keys: SecretKeys) {
    this.currentId = keyId(keys.current);
    this.byId.set(this.currentId, keys.current);
    for (const k of keys.previous) if (!this.byId.has(keyId(k))) this.byId.set(keyId(k), k);
  }

  seal(plain: string, binding: string): { sealed: Buffer; keyId: string } {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.byId.get(this.currentId)!, iv);
    cipher.setAAD(Buffer.from(binding));
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return { sealed: Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body]), keyId: this.currentId };
  }

  /** The value, or undefined when its key is not configured or it does not open (tampered, or another row's). */
  open(sealed: Buffer, sealedWith: string, binding: string): string | undefined {
    const key = this.byId.get(sealedWith);
    if (!key || sealed[0] !== VERSION || sealed.length < 1 + IV_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(1, 1 + IV_BYTES));
      decipher.setAAD(Buffer.from(binding));
      decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      // The authentication tag did not match: a tampered value or one moved from another row. Not a value.
      return undefined;
    }
  }
}
