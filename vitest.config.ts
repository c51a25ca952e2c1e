import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/** The SDK package from its sources, so that tests of it and of the CLI run without building it first. */
const sdk = (file: string) => fileURLToPath(new URL(`./packages/svc/src/${file}`, import.meta.url));

/**
 * Test files that load both cores for minutes (thousands of jobs through three replicas): run on their own after
 * the rest (`npm run test:alone`), so that neither they nor the timing-sensitive tests run beside each other.
 */
const ALONE = ["test/cluster/three-replicas.test.ts"];
const alone = process.env.SVC_TESTS_ALONE === "1";

export default defineConfig({
  resolve: {
    alias: [
      { find: /^svc$/, replacement: sdk("index.ts") },
      { find: /^svc\/internal$/, replacement: sdk("internal.ts") },
    ],
  },
  test: {
    include: alone ? ALONE : ["src/**/*.test.ts", "packages/*/src/**/*.test.ts", "console/**/*.test.ts", "test/**/*.test.ts"],
    exclude: alone ? [] : ["**/node_modules/**", ...ALONE],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests start real servers and child processes; two cores, so keep parallelism modest.
    maxWorkers: 2,
    pool: "forks",
    // SVC_TEST_STORE=postgres: the service tests on PostgreSQL (test/global-postgres.ts).
    globalSetup: ["test/global-postgres.ts"],
  },
});
