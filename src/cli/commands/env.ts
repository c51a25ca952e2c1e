// `svc env list|get|create|delete`: environments of an app. Deleting one removes its endpoints (answered once
// their workers have stopped).

import { resolve } from "node:path";
import type { Command } from "commander";
import { DeployClient, serviceAddress } from "../../deploy/client.js";
import { resolveApp } from "../../deploy/index.js";
import { UserError } from "../../errors.js";
import { createOutput } from "../output.js";
import { announceTarget } from "../target.js";
import { renderEnvironment } from "./app.js";
import { confirmDestructive } from "../confirm.js";

export function register(program: Command): void {
  const env = program.command("env").description("Environments of an app: list, get, create, delete");
  const appOption = "app name (default: SVC_APP, else the project's package.json name)";
  const setup = (flagApp: string | undefined, env?: string) => {
    const root = resolve(process.cwd());
    const address = serviceAddress(root, env);
    announceTarget(address);
    return { client: new DeployClient(address), app: resolveApp(flagApp, root) };
  };

  env
    .command("list")
    .description("List the app's environments")
    .option("--app <name>", appOption)
    .option("--json", "print as JSON")
    .action(async (flags: { app?: string; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const { client, app } = setup(flags.app);
      const environments = await client.environments(app);
      if (environments === null) throw new UserError(`No app "${app}" on ${client.address.url}`, { hint: "Deploy it with `svc deploy`, or pass --app." });
      out.result({ app, environments }, () =>
        environments.length === 0 ? `App ${app} has no environments` : [`App ${app}`, ...environments.flatMap(renderEnvironment)].join("\n"),
      );
    });

  env
    .command("get <name>")
    .description("Show an environment: its build and endpoints")
    .option("--app <name>", appOption)
    .option("--json", "print as JSON")
    .action(async (name: string, flags: { app?: string; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const { client, app } = setup(flags.app, name);
      const found = await client.environment(app, name);
      out.result(found, () => [`App ${app}`, ...renderEnvironment(found)].join("\n"));
    });

  env
    .command("create <name>")
    .description("Create an environment (and the app when absent)")
    .option("--app <name>", appOption)
    .option("--json", "print as JSON")
    .action(async (name: string, flags: { app?: string; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const { client, app } = setup(flags.app, name);
      const created = await client.ensureEnvironment(app, name);
      if (!created.created) throw new UserError(`App "${app}" already has an environment "${name}"`);
      out.result(created, () => `Created environment ${name} of app ${app}; deploy to it with \`svc deploy --env ${name}\``);
    });

  env
    .command("delete <name>")
    .description("Delete an environment and its endpoints")
    .option("--app <name>", appOption)
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print what was removed as JSON")
    .action(async (name: string, flags: { app?: string; yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const { client, app } = setup(flags.app, name);
      const found = await client.environment(app, name);
      await confirmDestructive(out, flags.yes, `deletes environment "${name}" of app "${app}" with ${found.endpoints.length} endpoint(s)`);
      const answer = await client.deleteEnvironment(app, name);
      out.result(answer, () =>
        [`Deleted environment ${name} of app ${app} (workers stopped)`, ...answer.removed.map((r) => `  - ${r.name} (${r.id})`)].join("\n"),
      );
    });
}
