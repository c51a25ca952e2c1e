import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/** The SDK package from its sources, so that tests of it and of the CLI run without building it first. */
const sdk = (file: string) => fileURLToPath(new URL(`./packages/svc/src/${file}`, import.meta.url));

/**
 * Test files run on their own after the rest (`npm run test:alone`), one at a time: one that loads both cores for
 * minutes (thousands of jobs through three replicas), and one whose bound is a time (`/health` within a second
 * while 80 slow clients hold the service), which the rest's load on two cores can exceed.
 */
const ALONE = ["test/cluster/three-replicas.test.ts", "test/service/slow-clients.test.ts"];
const alone = process.env.SVC_TESTS_ALONE === "1";

/**
 * The unit tests beside the code (pure logic, servers on 127.0.0.1 at most) share their worker processes: each
 * file would otherwise pay a fresh process and its module loading (docs/design/0020-suite-length.md). Those that
 * mock a module stay isolated with the rest.
 */
const UNIT = ["src/**/*.test.ts", "packages/*/src/**/*.test.ts", "console/**/*.test.ts"];
const UNIT_ISOLATED = ["src/lb-credential.test.ts"];
/** SVC_TEST_STORE=postgres: the service tests on PostgreSQL (test/global-postgres.ts). */
const STORE_SETUP = ["test/global-postgres.ts"];

export default defineConfig({
  resolve: {
    alias: [
      { find: /^svc$/, replacement: sdk("index.ts") },
      { find: /^svc\/internal$/, replacement: sdk("internal.ts") },
    ],
  },
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests start real servers and child processes; two cores, so keep parallelism modest.
    maxWorkers: alone ? 1 : 2,
    pool: "forks",
    projects: alone
      ? [{ extends: true, test: { name: "alone", include: ALONE, globalSetup: STORE_SETUP } }]
      : [
          {
            extends: true,
            test: {
              name: "integration",
              include: ["test/**/*.test.ts", ...UNIT_ISOLATED],
              exclude: ["**/node_modules/**", ...ALONE],
              globalSetup: STORE_SETUP,
            },
          },
          { extends: true, test: { name: "unit", include: UNIT, exclude: ["**/node_modules/**", ...UNIT_ISOLATED], isolate: false } },
        ],
  },
});
