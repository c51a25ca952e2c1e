// `svc undeploy [endpoint-name | --all] [--env]`: remove endpoints of a deployed environment; answers once
// their workers have stopped, and says what it removed.

import { resolve } from "node:path";
import type { Command } from "commander";
import { DeployClient, serviceAddress } from "../../deploy/client.js";
import { resolveApp, resolveExistingEnvironment } from "../../deploy/index.js";
import { UsageError } from "../../errors.js";
import { createOutput } from "../output.js";
import { announceTarget } from "../target.js";
import { confirmDestructive } from "../confirm.js";

export function register(program: Command): void {
  program
    .command("undeploy [endpoint]")
    .description("Remove one endpoint (or --all) of a deployed environment; its workers are stopped first")
    .option("--all", "remove every endpoint of the environment")
    .option("--env <name>", "environment (default: SVC_ENV, else the app's only one)")
    .option("--app <name>", "app name (default: SVC_APP, else the project's)")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print what was removed as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .action(async (endpoint: string | undefined, flags: { all?: boolean; env?: string; app?: string; yes?: boolean; json?: boolean; dir?: string }) => {
      if (!endpoint && !flags.all) throw new UsageError("Say what to undeploy: an endpoint name, or --all");
      if (endpoint && flags.all) throw new UsageError("Give an endpoint name or --all, not both");
      const out = createOutput({ json: flags.json });
      const root = resolve(flags.dir ?? process.cwd());
      const address = serviceAddress(root, flags.env);
      announceTarget(address);
      const client = new DeployClient(address);
      const app = resolveApp(flags.app, root);
      const environment = await resolveExistingEnvironment(client, app, flags.env, "svc undeploy");
      const names = flags.all ? environment.endpoints.map((e) => e.name) : [endpoint!];
      await confirmDestructive(out, flags.yes, `removes ${names.length} endpoint(s) from app "${app}", environment "${environment.env}": ${names.join(", ")}`);
      const answer = await client.undeploy(app, environment.env, flags.all ? { all: true } : { endpoints: [endpoint!] });
      out.result(answer, () =>
        answer.removed.length === 0
          ? `Nothing to remove in ${app}/${answer.env}`
          : [`Removed from ${app}/${answer.env} (workers stopped):`, ...answer.removed.map((r) => `  - ${r.name} (${r.id})`)].join("\n"),
      );
    });
}
