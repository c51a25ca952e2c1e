// `svc secret set|list|delete`: values a deploy must not carry (tokens, database URLs), given to the workers of
// the endpoints that name them (`secrets: ["HF_TOKEN"]`). A value is read from a hidden prompt on a terminal or
// from standard input, never from an argument (shell history, `ps`).

import type { Command } from "commander";
import { confirmDestructive } from "../confirm.js";
import { management, table } from "../management.js";
import { createOutput } from "../output.js";
import { readSecret } from "../secret-input.js";
import { serviceTarget } from "../target.js";
import { envSetting } from "svc/internal";
import { UserError } from "../../errors.js";

/**
 * Nothing names a service (no running `svc dev` here, no profile, no SVC_API_URL): say what to run before asking
 * for a value that would go nowhere.
 */
function requireSomeService(name: string): void {
  const target = serviceTarget();
  if (target.source !== "environment" || envSetting("SVC_API_URL") !== undefined) return;
  throw new UserError(`No service to set ${name} on: no \`svc dev\` runs in this project, and no service is configured`, {
    hint:
      `For svc dev: add ${name}=... to .env (svc dev reads it, and reloads when it changes), or start \`svc dev\` in this project and run \`svc secret set ${name}\` again from another terminal. ` +
      "For a deployed service: `svc login <url>` first (or set SVC_API_URL and SVC_API_KEY).",
  });
}

interface SecretInfo {
  name: string;
  app: string | null;
  env: string | null;
  createdAt: number;
  updatedAt: number;
}
interface Rolling {
  rolling: Array<{ name: string; app: string; env: string }>;
}

const scopeText = (app?: string | null, env?: string | null) => (app ? `app "${app}"${env ? `, environment "${env}"` : ""}` : "all apps");
const rollingText = (r: Rolling) => (r.rolling.length > 0 ? `; workers roll on ${r.rolling.map((e) => `${e.app}/${e.env}/${e.name}`).join(", ")}` : "");

function query(o: { app?: string; env?: string }): string {
  const q = new URLSearchParams();
  if (o.app) q.set("app", o.app);
  if (o.env) q.set("env", o.env);
  const s = q.toString();
  return s ? `?${s}` : "";
}

export function register(program: Command): void {
  const secret = program.command("secret").description("Secrets the workers of your endpoints get as environment variables (values are never shown)");
  secret
    .command("set")
    .description("Set a secret's value (hidden prompt on a terminal, else standard input); endpoints using it roll their workers")
    .argument("<name>", "the environment variable's name, e.g. HF_TOKEN")
    .option("--app <name>", "only for this app (default: all your apps)")
    .option("--env <name>", "only for this environment of --app")
    .option("--json", "print JSON")
    .action(async (name: string, o: { app?: string; env?: string; json?: boolean }) => {
      requireSomeService(name);
      const value = await readSecret(`value for ${name}`, `Value of ${name} (${scopeText(o.app, o.env)}): `);
      const r = await management<SecretInfo & Rolling & { created: boolean }>("PUT", `/v1/secrets/${encodeURIComponent(name)}`, {
        value,
        app: o.app,
        env: o.env,
      });
      createOutput({ json: o.json }).result(r, () => `${r.created ? "Set" : "Changed"} secret ${r.name} for ${scopeText(r.app, r.env)}${rollingText(r)}`);
    });
  secret
    .command("list")
    .description("Your secrets: names, scopes and dates")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<SecretInfo[]>("GET", "/v1/secrets");
      const iso = (t: number) => new Date(t).toISOString();
      createOutput({ json: o.json }).result(list, () =>
        table(
          list.map((s) => ({ ...s, app: s.app ?? "(all)", env: s.env ?? (s.app ? "(all)" : ""), createdAt: iso(s.createdAt), updatedAt: iso(s.updatedAt) })),
          ["name", "app", "env", "createdAt", "updatedAt"],
        ),
      );
    });
  secret
    .command("delete")
    .description("Forget a secret; endpoints using it roll their workers (without it)")
    .argument("<name>", "the secret's name")
    .option("--app <name>", "the app it was set for")
    .option("--env <name>", "the environment it was set for")
    .option("--yes", "do not ask")
    .option("--json", "print JSON")
    .action(async (name: string, o: { app?: string; env?: string; yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      await confirmDestructive(out, o.yes, `deletes secret ${name} for ${scopeText(o.app, o.env)}`);
      const r = await management<{ deleted: string; app: string | null; env: string | null } & Rolling>(
        "DELETE",
        `/v1/secrets/${encodeURIComponent(name)}${query(o)}`,
      );
      out.result(r, () => `Deleted secret ${r.deleted} for ${scopeText(r.app, r.env)}${rollingText(r)}`);
    });
}
