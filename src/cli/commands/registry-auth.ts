// `svc registry-auth create|list|delete`: credentials for private container registries, which a template names
// (`svc template create --registry-auth <id>`) so that its image is pulled with them. The password is read from a
// hidden prompt on a terminal or from standard input, never from an argument (shell history, `ps`), and no answer
// of the service carries it back.

import type { Command } from "commander";
import { confirmDestructive } from "../confirm.js";
import { management, table } from "../management.js";
import { createOutput } from "../output.js";
import { readSecret } from "../secret-input.js";

type RegistryAuth = { id: string; name: string };

export function register(program: Command): void {
  const auth = program.command("registry-auth").description("Credentials for private container registries that templates' images are pulled with");
  auth
    .command("create")
    .description("Store a username and password (hidden prompt on a terminal, else standard input) for the registries of your images")
    .requiredOption("--name <name>", "a name of yours for them, unique among your registry auths")
    .requiredOption("--username <username>", "the registry's username")
    .option("--json", "print JSON")
    .action(async (o: { name: string; username: string; json?: boolean }) => {
      const password = await readSecret("password", `Password (or access token) of ${o.username}: `);
      const r = await management<RegistryAuth>("POST", "/v1/containerregistryauth", { name: o.name, username: o.username, password });
      createOutput({ json: o.json }).result(r, () => `Created registry auth ${r.id} ("${r.name}"); name it in a template with --registry-auth ${r.id}`);
    });
  auth
    .command("list")
    .description("Your registry auths (ids and names; never their credentials)")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<RegistryAuth[]>("GET", "/v1/containerregistryauth");
      createOutput({ json: o.json }).result(list, () => table(list, ["id", "name"]));
    });
  auth
    .command("delete")
    .description("Forget a registry auth (refused while a template names it)")
    .argument("<id>", "the registry auth's id")
    .option("--yes", "do not ask")
    .option("--json", "print JSON")
    .action(async (id: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      await confirmDestructive(out, o.yes, `deletes registry auth ${id}`);
      await management<undefined>("DELETE", `/v1/containerregistryauth/${encodeURIComponent(id)}`);
      out.result({ id, deleted: true }, () => `Deleted registry auth ${id}`);
    });
}
