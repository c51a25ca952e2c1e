// Types for the throwaway PostgreSQL server of the tests (scripts/throwaway-postgres.mjs, shared with the benches).

import * as throwaway from "../scripts/throwaway-postgres.mjs";

export interface TestPostgres {
  /** A URL of the server's `postgres` database, for administration. */
  adminUrl: string;
  /** A new empty database; its URL. */
  createDatabase(name?: string): Promise<string>;
  /** Stop the server and remove its directory (for an outside server: drop the databases made). */
  stop(): Promise<void>;
  /** Stop the server abruptly (immediate mode), keeping its data; `start()` brings it back on the same port. */
  kill(): void;
  start(): void;
}

/** Why no server can be started here, or undefined when one can. */
export const postgresUnavailable: () => string | undefined = throwaway.postgresUnavailable;

export const startPostgres: (options?: { durable?: boolean }) => Promise<TestPostgres> = throwaway.startPostgres;
