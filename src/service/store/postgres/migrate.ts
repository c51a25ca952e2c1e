// Brings a PostgreSQL database to the schema it is given (numbered migrations, src/service/schema/postgres.ts).
// Every replica runs `migrate` at start; a transaction-scoped advisory lock makes the others wait, then find
// nothing left to do.

import type pg from "pg";
import { UserError } from "../../../errors.js";

/** Any constant: the lock only orders svc's own migrations. */
const MIGRATION_LOCK = 0x5356_4301;

/** Bring the database to the schema this svc knows; refuse one written by a newer svc. */
export async function migrate(client: pg.ClientBase, migrations: readonly string[]): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query("CREATE TABLE IF NOT EXISTS svc_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())");
    const { rows } = await client.query<{ version: number | null }>("SELECT max(version) AS version FROM svc_schema");
    const current = rows[0]?.version ?? 0;
    if (current > migrations.length) {
      throw new UserError(`The database was written by a newer svc (schema ${current}, this svc knows ${migrations.length})`, {
        hint: "Upgrade svc on every replica, or point --store at another database.",
      });
    }
    for (let version = current; version < migrations.length; version++) {
      await client.query(migrations[version]!);
      await client.query("INSERT INTO svc_schema (version) VALUES ($1)", [version + 1]);
    }
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined /* the connection itself failed: the error below says why */);
    throw err;
  }
}
