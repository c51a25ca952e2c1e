// `svc keys create|list|revoke`: API keys of users, with scopes (needs an admin key).
import type { Command } from "commander";
import { confirmDestructive } from "../confirm.js";
import { defined, fields, listFlag, management, table } from "../management.js";
import { createOutput } from "../output.js";
import { durationFlag, timeFromNow } from "../duration.js";

type Key = {
  id: string;
  name: string | null;
  userId: string;
  scopes: string[];
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  inUse?: boolean;
  key?: string;
};

/** One key's fields as people read them: ISO times with how long ago or until (--json keeps epoch milliseconds). */
const readable = (k: Key, now = Date.now()) => {
  const when = (t: number | null) => (t === null ? null : `${new Date(t).toISOString()} (${timeFromNow(t, now)})`);
  return { ...k, createdAt: when(k.createdAt), expiresAt: when(k.expiresAt), revokedAt: when(k.revokedAt), inUse: k.inUse ? "yes (this CLI)" : "" };
};

/** A key as a table's row: times relative ("3d ago", "in 29d"; `never` for no expiry). */
const row = (k: Key, now = Date.now()) => ({
  ...k,
  created: timeFromNow(k.createdAt, now),
  expires: k.expiresAt === null ? "never" : timeFromNow(k.expiresAt, now),
  revoked: k.revokedAt === null ? null : timeFromNow(k.revokedAt, now),
  inUse: k.inUse ? "yes (this CLI)" : "",
});

export function register(program: Command): void {
  const keys = program
    .command("keys")
    .description("Manage API keys (scopes: admin, deploy, metrics, management:read, management:write, jobs:*, jobs:<endpointId>)");
  keys
    .command("create")
    .description("Create an API key; the secret is printed once")
    .requiredOption("--scope <scopes>", "scope(s), comma separated (repeatable)", listFlag)
    .option("--name <name>", "a name to recognise it by")
    .option("--user <id>", "another user (operator only; the user is created)")
    .option("--expires-in <duration>", "expire after this long (30d, 12h; a bare number is seconds)", durationFlag("--expires-in", "s"))
    .option("--json", "print JSON")
    .action(async (o: { scope: string[]; name?: string; user?: string; expiresIn?: number; json?: boolean }) => {
      const k = await management<Key>("POST", "/v1/keys", defined({ scopes: o.scope, name: o.name, userId: o.user, expiresInSeconds: o.expiresIn }));
      const out = createOutput({ json: o.json });
      if (!o.json) out.info("Keep this key now: it is not shown again.");
      out.result(k, () => fields(readable(k)));
    });
  keys
    .command("list")
    .description("List API keys (secrets are never shown)")
    .option("--user <id>", "another user's keys (operator only)")
    .option("--json", "print JSON")
    .action(async (o: { user?: string; json?: boolean }) => {
      const list = await management<Key[]>("GET", `/v1/keys${o.user ? `?userId=${encodeURIComponent(o.user)}` : ""}`);
      const now = Date.now();
      createOutput({ json: o.json }).result(list, () =>
        table(
          list.map((k) => row(k, now)),
          ["id", "name", "userId", "scopes", "created", "expires", "revoked", "inUse"],
        ),
      );
    });
  keys
    .command("revoke")
    .description("Revoke an API key (it is refused from then on)")
    .argument("<id>", "key id")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (id: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      // Fetched first: a wrong id fails before anything is asked, and the question says when it is this CLI's key.
      const key = await management<Key>("GET", `/v1/keys/${encodeURIComponent(id)}`);
      const what = key.inUse
        ? `revokes API key ${id}, THE KEY THIS CLI USES (SVC_API_KEY): every command after this one is refused with 401 until you set another key`
        : `revokes API key ${id}${key.name ? ` ("${key.name}")` : ""}: every request with it is refused from then on`;
      await confirmDestructive(out, o.yes, what);
      const k = await management<Key>("DELETE", `/v1/keys/${encodeURIComponent(id)}`);
      out.result(k, () => `revoked API key ${k.id}`);
    });
}
