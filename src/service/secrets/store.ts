// Durable secrets: one row per (user, app, environment, name), the value sealed (box.ts). Its table lives in the
// service's SQLite file (the numbered migration below, listed in src/service/schema/sqlite.ts); this module uses
// its own connection, as the management store does. A server-grade store implements `SecretStore` the same way.

import { openDatabase } from "../store/driver.js";

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
