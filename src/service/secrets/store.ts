// Durable secrets: one row per (user, app, environment, name), the value sealed (box.ts). Its table lives in the
// service's SQLite file (the numbered migration below, listed in src/service/schema/sqlite.ts); this module uses
// its own connection, as the management store does. A server-grade store implements `SecretStore` the same way.

import { openDatabase } from "../store/driver.js";
import type { Queryable } from "../store/queryable.js";

/** Appended to SQLITE_MIGRATIONS. `app` and `env` are "" for a secret of every app (or every environment of one). */
export const SECRETS_MIGRATION = `
  CREATE TABLE secrets (
    user_id TEXT NOT NULL, app TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
    sealed BLOB NOT NULL, key_id TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, app, env, name));`;

export interface SecretRow {
  userId: string;
  app: string;
  env: string;
  name: string;
  sealed: Buffer;
  keyId: string;
  createdAt: number;
  updatedAt: number;
}

export interface SecretStore {
  all(): SecretRow[];
  /** Committed when it returns (or its promise settles: a database server). */
  put(row: SecretRow): void | Promise<void>;
  delete(userId: string, app: string, env: string, name: string): boolean | Promise<boolean>;
  close(): void;
}

/** A row of the secrets table (SQLite and PostgreSQL give it the same columns). */
export const secretRowOf = (r: Record<string, unknown>): SecretRow => ({
  userId: r.user_id as string,
  app: r.app as string,
  env: r.env as string,
  name: r.name as string,
  sealed: r.sealed as Buffer,
  keyId: r.key_id as string,
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

export function openSqliteSecretStore(file: string): SecretStore {
  const db = openDatabase(file);
  db.pragma("busy_timeout = 5000");
  const q = {
    all: db.prepare("SELECT * FROM secrets ORDER BY user_id, name, app, env"),
    put: db.prepare(
      `INSERT INTO secrets (user_id, app, env, name, sealed, key_id, created_at, updated_at)
       VALUES (@userId, @app, @env, @name, @sealed, @keyId, @createdAt, @updatedAt)
       ON CONFLICT (user_id, app, env, name) DO UPDATE SET sealed = excluded.sealed, key_id = excluded.key_id, updated_at = excluded.updated_at`,
    ),
    delete: db.prepare("DELETE FROM secrets WHERE user_id = ? AND app = ? AND env = ? AND name = ?"),
  };
  return {
    all: () => (q.all.all() as Record<string, unknown>[]).map(secretRowOf),
    put: (row) => void q.put.run(row),
    delete: (userId, app, env, name) => q.delete.run(userId, app, env, name).changes > 0,
    close: () => db.close(),
  };
}

// Sealed secrets on PostgreSQL: every row kept in memory and read there, synchronously, as the SQLite store
// does; a write is committed before the memory changes, and `reload()` reads the table again (what another
// replica wrote, cluster/config-sync.ts).
export type ReloadingSecretStore = SecretStore & { reload(): Promise<void> };

export async function openPostgresSecretStore(pool: Queryable): Promise<ReloadingSecretStore> {
  let rows: SecretRow[] = [];
  let writes = 0;
  const same = (a: SecretRow, userId: string, app: string, env: string, name: string) =>
    a.userId === userId && a.app === app && a.env === env && a.name === name;
  const reload = async () => {
    const before = writes;
    const result = await pool.query("SELECT * FROM secrets");
    // Reads that began before a write of this replica's may miss it: keep the memory until the next reload.
    if (writes !== before) return;
    rows = result.rows.map(secretRowOf);
  };
  await reload();
  return {
    reload,
    all: () => rows,
    async put(row) {
      await pool.query(
        `INSERT INTO secrets (user_id, app, env, name, sealed, key_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (user_id, app, env, name) DO UPDATE SET sealed = excluded.sealed, key_id = excluded.key_id, updated_at = excluded.updated_at`,
        [row.userId, row.app, row.env, row.name, row.sealed, row.keyId, row.createdAt, row.updatedAt],
      );
      writes++;
      rows = [...rows.filter((r) => !same(r, row.userId, row.app, row.env, row.name)), row];
    },
    async delete(userId, app, env, name) {
      const { rowCount } = await pool.query("DELETE FROM secrets WHERE user_id = $1 AND app = $2 AND env = $3 AND name = $4", [userId, app, env, name]);
      writes++;
      rows = rows.filter((r) => !same(r, userId, app, env, name));
      return rowCount === 1;
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
