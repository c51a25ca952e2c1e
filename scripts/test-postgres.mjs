#!/usr/bin/env node
// `npm run test:postgres`: the service, management and deploy suites again with the state in PostgreSQL (a
// throwaway server for the run: test/global-postgres.ts). Where PostgreSQL's server cannot run, says why and
// skips, except in CI (CI=true), where .ci/run installs it and a skip would hide a failure.
import { spawnSync } from "node:child_process";
import { postgresUnavailable } from "./throwaway-postgres.mjs";

const why = postgresUnavailable();
if (why) {
  if (/^(1|true|yes)$/i.test(process.env.CI ?? "")) {
    console.error(`test:postgres: ${why}, and CI is set: .ci/run installs Debian's postgresql`);
    process.exit(1);
  }
  console.error(`test:postgres: skipped, ${why}`);
  process.exit(0);
}
const suites = ["test/service", "test/management", "test/deploy"];
const result = spawnSync(process.execPath, ["node_modules/vitest/vitest.mjs", "run", ...suites, ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, SVC_TEST_STORE: "postgres" },
});
process.exit(result.status ?? 1);
