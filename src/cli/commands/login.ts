// `svc login`, `svc logout`, `svc whoami`: named service targets (profiles) and who a key acts as.
// The key is read from a hidden prompt or standard input, checked against the service (GET /v1/me), and only
// then stored (src/profiles.ts: mode 0600 in the user's config directory).

import type { Command } from "commander";
import { ApiError, asError, errorMessage, ExitCode, UsageError, UserError } from "../../errors.js";
import { DEFAULT_API_URL, envSetting, readJson } from "svc/internal";
import { DEFAULT_PROFILE, checkProfileName, namedProfile, profilesPath, readProfiles, withoutProfile, withProfile, writeProfiles } from "../../profiles.js";
import { fields } from "../management.js";
import { createOutput } from "../output.js";
import { readSecret } from "../secret-input.js";
import { apiFetch, serviceTarget, type ServiceTarget } from "../target.js";

export interface Me {
  userId: string;
  keyId: string;
  key: { id: string; name: string | null; expiresAt: number | null } | null;
  scopes: string[];
  worker?: { endpointId: string };
  rateLimits: Array<{ name: string; quota: number; seconds: number }>;
}

async function fetchMe(target: ServiceTarget): Promise<Me> {
  return readJson<Me>(await apiFetch(target, "/v1/me"));
}

export function describeTarget(t: ServiceTarget): string {
  if (t.source === "profile") return `profile "${t.profile}"`;
  if (t.source === "dev-session") return "the running svc dev session of this project";
  return envSetting("SVC_API_URL") ? "SVC_API_URL / SVC_API_KEY" : "the local service (no SVC_API_URL, no profile)";
}

export function register(program: Command): void {
  program
    .command("login")
    .description("Check an API key against a service and store the pair as a profile (key read from a hidden prompt or stdin)")
    .option("--url <url>", "the service's address (default: SVC_API_URL, else the profile's, else the local service)")
    .option("--json", "print JSON")
    .action(async (o: { url?: string; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      const name = checkProfileName(namedProfile() ?? DEFAULT_PROFILE);
      const data = readProfiles();
      const url = (o.url ?? envSetting("SVC_API_URL") ?? data.profiles[name]?.url ?? DEFAULT_API_URL).replace(/\/+$/, "");
      if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`--url must be an http(s) address, not "${url}"`);
      // Before the key is asked for: a service must answer there (any HTTP answer; the key is checked below).
      await fetch(`${url}/v1/me`, { signal: AbortSignal.timeout(10_000) }).then(
        (r) => r.body?.cancel(),
        (err: unknown) => {
          const chosen = o.url ? "--url" : envSetting("SVC_API_URL") ? "SVC_API_URL" : data.profiles[name]?.url ? `profile "${name}"` : "the local default";
          throw new UserError(`Cannot reach the svc service at ${url} (${chosen}): ${errorMessage(asError(err).cause ?? err)}`, {
            hint: "Pass the service's address: `svc login --url https://svc.example.com` (`svc server` prints it when it starts).",
            exitCode: ExitCode.unreachable,
            cause: err,
          });
        },
      );
      const apiKey = await readSecret("API key", `API key for ${url}: `);
      const me = await fetchMe({ url, apiKey, source: "profile", profile: name }).catch((err: unknown) => {
        // Only a refusal is about the key; nothing answering (or not an svc service) says so itself.
        if (!(err instanceof ApiError && (err.status === 401 || err.status === 403))) throw err;
        throw new UserError(`${url} did not accept the key: nothing was stored`, {
          hint: "Check the key (`svc keys list` on a machine that has a working one) and the URL.",
          cause: err,
        });
      });
      // The first profile, or one named explicitly by its login, becomes the one commands use by default.
      const next = withProfile(
        data,
        name,
        { url, apiKey, userId: me.userId, keyId: me.keyId, savedAt: Date.now() },
        namedProfile() === undefined || !data.current,
      );
      writeProfiles(next);
      const result = { profile: name, current: next.current === name, url, userId: me.userId, keyId: me.keyId, scopes: me.scopes, file: profilesPath() };
      out.result(
        result,
        () =>
          `Logged in to ${url} as user ${me.userId} (key ${me.keyId}, scopes ${me.scopes.join(", ")}): profile "${name}"` +
          (result.current ? "" : ` (use it with --profile ${name} or SVC_PROFILE=${name})`),
      );
    });

  program
    .command("logout")
    .description("Forget a stored profile (--profile, else the current one); the key itself stays valid on the service")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const out = createOutput({ json: o.json });
      const data = readProfiles();
      const name = namedProfile() ?? data.current;
      if (!name || !data.profiles[name])
        throw new UserError(name ? `No profile "${name}"` : "Not logged in: there is no current profile", {
          hint: "`svc login --url <service URL>` stores one.",
        });
      const next = withoutProfile(data, name);
      writeProfiles(next);
      out.result(
        { removed: name, current: next.current ?? null },
        () =>
          `Removed profile "${name}"${next.current ? `; commands now use profile "${next.current}"` : ""}. The key is still valid on the service: \`svc keys revoke ${data.profiles[name]!.keyId ?? "<id>"}\` revokes it.`,
      );
    });

  program
    .command("whoami")
    .description("Which service this CLI talks to, and the user, key, scopes and rate limits it acts with")
    .option("--key", 'print only the API key this CLI uses (for a command line: curl -H "Authorization: Bearer $(svc whoami --key)")')
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean; key?: boolean }) => {
      const out = createOutput({ json: o.json });
      // whoami prints the target itself (and `--key` runs inside printed curls): no line of its own.
      const target = serviceTarget({ quiet: true });
      if (!target.apiKey) throw new UserError(`No API key for ${target.url}`, { hint: "Run `svc login --url <service URL>`, or set SVC_API_KEY." });
      if (o.key) {
        // Local, no request: a printed curl calls this in its command substitution.
        process.stdout.write(`${target.apiKey}\n`);
        return;
      }
      const me = await fetchMe(target);
      const result = { url: target.url, via: describeTarget(target), ...me };
      out.result(result, () =>
        fields({
          service: target.url,
          via: result.via,
          user: me.userId,
          key: `${me.keyId}${me.key?.name ? ` (${me.key.name})` : ""}${me.key === null ? " (given to the service at start)" : ""}`,
          scopes: me.scopes,
          expires: me.key?.expiresAt ? new Date(me.key.expiresAt).toISOString() : "never",
          "rate limits": me.rateLimits.map((w) => `${w.quota}/${w.name}`),
        }),
      );
    });
}
