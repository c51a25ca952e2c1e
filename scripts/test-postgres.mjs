#!/usr/bin/env node
// `npm run test:postgres`: the service, management and deploy suites again with the state in PostgreSQL (a
// throwaway server for the run: test/global-postgres.ts). Where PostgreSQL's server cannot run, says why and
// skips, except in CI (CI=true), where .ci/run installs it and a skip would hide a failure.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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
// Only the files whose services take their store from SVC_TEST_STORE: those that start the in-process test service
// (startTestService, directly or through cliAgainstTestService) or ask for the run's store (testStoreUrl). The
// others (a `svc server` process on its data directory's SQLite, a service started with a store of its own, one on
// a PostgreSQL of its own) would run exactly as in `vitest run`: running them again tests nothing more.
const suites = ["test/service", "test/management", "test/deploy"];
const usesTestStore = /\b(startTestService|cliAgainstTestService|testStoreUrl)\(/;
const files = suites
  .flatMap((dir) => readdirSync(dir).map((name) => join(dir, name)))
  .filter((file) => file.endsWith(".test.ts") && usesTestStore.test(readFileSync(file, "utf8")))
  .sort();
const result = spawnSync(process.execPath, ["node_modules/vitest/vitest.mjs", "run", ...files, ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, SVC_TEST_STORE: "postgres" },
});
process.exit(result.status ?? 1);
