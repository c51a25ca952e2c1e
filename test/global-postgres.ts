// With SVC_TEST_STORE=postgres, the service tests run on PostgreSQL: one throwaway server for the whole run,
// started here, and a database of its own for every service a test starts (test/service/helpers.ts).

import { startPostgres } from "./postgres.js";

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.SVC_TEST_STORE !== "postgres" || process.env.SVC_TEST_POSTGRES_URL) return undefined;
  const server = await startPostgres();
  process.env.SVC_TEST_POSTGRES_URL = server.adminUrl;
  return () => server.stop();
}
