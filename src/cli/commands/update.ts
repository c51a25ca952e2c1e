// `svc update`: configuration-only changes from the code (workers, GPU types, env, idle timeout) applied to a
// deployed environment without a new build. GPU or worker-count changes restart the workers.

import { resolve } from "node:path";
import { serviceAddress } from "../../deploy/client.js";
import { announceTarget } from "../target.js";
import type { Command } from "commander";
import { updateConfig } from "../../deploy/index.js";
import { createOutput } from "../output.js";

export function register(program: Command): void {
  program
    .command("update")
    .description("Apply configuration changes from the code (workers, GPU types, env, idle timeout) without a new build")
    .option("--env <name>", "environment (default: SVC_ENV, else the app's only one)")
    .option("--app <name>", "app name (default: SVC_APP, else the project's)")
    .option("--dry-run", "show the changes and apply nothing")
    .option("--json", "print the changes as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .action(async (flags: { env?: string; app?: string; dryRun?: boolean; json?: boolean; dir?: string }) => {
      const out = createOutput({ json: flags.json });
      const root = resolve(flags.dir ?? process.cwd());
      const address = serviceAddress(root, flags.env);
      announceTarget(address);
      const result = await updateConfig({ root, app: flags.app, env: flags.env, dryRun: flags.dryRun, address });
      out.result(result, () => {
        if (result.changes.length === 0) return `No configuration changes for ${result.app}/${result.env}`;
        const lines = [`${result.dryRun ? "Would update" : "Updated"} ${result.app}/${result.env}:`];
        for (const c of result.changes) lines.push(`  ~ ${c.name}: ${c.changed.join(", ")}${c.restart ? " (workers restart)" : ""}`);
        return lines.join("\n");
      });
    });
}
