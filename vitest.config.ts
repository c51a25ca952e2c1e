import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests start real servers and child processes; two cores, so keep parallelism modest.
    maxWorkers: 2,
    pool: "forks",
    // SVC_TEST_STORE=postgres: the service tests on PostgreSQL (test/global-postgres.ts).
    globalSetup: ["test/global-postgres.ts"],
  },
});
