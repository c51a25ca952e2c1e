// Volume access keys at rest: one row per key, its secret sealed under the service's secrets key (secrets/box.ts)
// and bound to the row (user and access key id), so it opens only for the key it belongs to. The S3 API must
// recompute signatures with the secret itself, so it is sealed rather than hashed as API keys are. The table
// lives beside the others (schema.ts: appended to both stores' migrations).

import { openDatabase } from "../store/driver.js";
import type { Queryable } from "../store/queryable.js";

export interface VolumeKeyRecord {
  /** The access key id (what clients send as AWS_ACCESS_KEY_ID). */
  id: string;
  userId: string;
  name: string | null;
  /** Reads only (list, head, get): every write is AccessDenied. */
  readOnly: boolean;
  /** Only these volumes of the user; null: every volume of the user, present and future. */
  volumeIds: string[] | null;
  sealed: Buffer;
  /** Which secrets key sealed it. */
  keyId: string;
  createdAt: number;
  revokedAt: number | null;
}

/** Writes are committed when they return (or their promise settles: a database server). */
export interface VolumeKeyStore {
  key(id: string): VolumeKeyRecord | undefined | Promise<VolumeKeyRecord | undefined>;
  keys(userId: string): VolumeKeyRecord[] | Promise<VolumeKeyRecord[]>;
  insert(k: VolumeKeyRecord): void | Promise<void>;
  revoke(id: string, at: number): void | Promise<void>;
  close(): void;
}

const recordOf = (r: Record<string, unknown>): VolumeKeyRecord => ({
  id: r.id as string,
  userId: r.user_id as string,
  name: (r.name as string | null) ?? null,
  readOnly: Boolean(r.read_only),
  volumeIds: r.volume_ids === null || r.volume_ids === undefined ? null : (JSON.parse(r.volume_ids as string) as string[]),
  sealed: r.sealed as Buffer,
  keyId: r.key_id as string,
  createdAt: Number(r.created_at),
  revokedAt: r.revoked_at === null || r.revoked_at === undefined ? null : Number(r.revoked_at),
});

const row = (k: VolumeKeyRecord) =>
  [k.id, k.userId, k.name, k.volumeIds === null ? null : JSON.stringify(k.volumeIds), k.sealed, k.keyId, k.createdAt, k.revokedAt] as const;

export function openSqliteVolumeKeyStore(file: string): VolumeKeyStore {
  const db = openDatabase(file);
  db.pragma("busy_timeout = 5000");
  const q = {
    key: db.prepare("SELECT * FROM volume_access_keys WHERE id = ?"),
    keys: db.prepare("SELECT * FROM volume_access_keys WHERE user_id = ? ORDER BY created_at, id"),
    insert: db.prepare(
      "INSERT INTO volume_access_keys (id, user_id, name, read_only, volume_ids, sealed, key_id, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    revoke: db.prepare("UPDATE volume_access_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
  };
  return {
    key: (id) => {
      const r = q.key.get(id) as Record<string, unknown> | undefined;
      return r && recordOf(r);
    },
    keys: (userId) => (q.keys.all(userId) as Record<string, unknown>[]).map(recordOf),
    insert: (k) => {
      const [id, userId, name, volumeIds, sealed, keyId, createdAt, revokedAt] = row(k);
      q.insert.run(id, userId, name, k.readOnly ? 1 : 0, volumeIds, sealed, keyId, createdAt, revokedAt);
    },
    revoke: (id, at) => void q.revoke.run(at, id),
    close: () => {
      if (db.open) db.close();
    },
  };
}

/** Read from the database at each look-up: a key revoked on another replica is refused at once. */
export function openPostgresVolumeKeyStore(pool: Queryable): VolumeKeyStore {
  return {
    async key(id) {
      const { rows } = await pool.query("SELECT * FROM volume_access_keys WHERE id = $1", [id]);
      return rows[0] ? recordOf(rows[0] as Record<string, unknown>) : undefined;
    },
    async keys(userId) {
      const { rows } = await pool.query("SELECT * FROM volume_access_keys WHERE user_id = $1 ORDER BY created_at, id", [userId]);
      return (rows as Record<string, unknown>[]).map(recordOf);
    },
    async insert(k) {
      const [id, userId, name, volumeIds, sealed, keyId, createdAt, revokedAt] = row(k);
      await pool.query(
        "INSERT INTO volume_access_keys (id, user_id, name, read_only, volume_ids, sealed, key_id, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [id, userId, name, k.readOnly, volumeIds, sealed, keyId, createdAt, revokedAt],
      );
    },
    async revoke(id, at) {
      await pool.query("UPDATE volume_access_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [at, id]);
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
