// Which service a command or a script talks to: one rule for every `svc` command and for endpoint calls from
// scripts (docs/cli.md, "Which service a command talks to"), and the stored profiles it reads.
//   1. SVC_API_URL (environment or .env): that address, with SVC_API_KEY;
//   2. a profile named by --profile or SVC_PROFILE;
//   3. a running `svc dev` session of the project, for the session's environment (`--env dev`);
//   4. the current stored profile;
//   5. a running `svc dev` session, when no environment is named;
//   6. the local service with SVC_API_KEY.
// A command naming another environment never lands in a dev session: a deploy meant for a service must not be
// swallowed by a throwaway local one.

import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { UserError } from "./errors.js";

/** A stored service target (`svc login`). The file holds secrets: the CLI writes it 0600 in a 0700 directory. */
export interface Profile {
  url: string;
  apiKey: string;
  /** Who the key was when it was stored (from GET /v1/me), for `svc login` with no argument to show. */
  userId?: string;
  keyId?: string;
  savedAt: number;
}

export interface ProfilesFile {
  current?: string;
  profiles: Record<string, Profile>;
}

/** `$SVC_CONFIG_DIR`, else `$XDG_CONFIG_HOME/svc`, else `~/.config/svc`. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "svc");
}

export function profilesPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(configDir(env), "profiles.json");
}

export function readProfiles(file = profilesPath()): ProfilesFile {
  if (!existsSync(file)) return { profiles: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UserError(`The profiles file ${file} is not valid JSON`, { hint: "Fix or delete it, then run `svc login` again.", cause: err });
  }
  const value = parsed as Partial<ProfilesFile> | null;
  const profiles: Record<string, Profile> = Object.create(null) as Record<string, Profile>;
  if (value && typeof value.profiles === "object" && value.profiles !== null) {
    for (const [name, p] of Object.entries(value.profiles)) {
      if (p && typeof p.url === "string" && typeof p.apiKey === "string") profiles[name] = p;
    }
  }
  return { current: typeof value?.current === "string" ? value.current : undefined, profiles };
}

export interface NamedProfile {
  name: string;
  profile: Profile;
}

/**
 * The profile named for this run (an error when it does not exist: a typo must not send a production command
 * elsewhere), and the current one.
 */
export function storedProfiles(named: string | undefined, env: NodeJS.ProcessEnv = process.env): { named?: NamedProfile; current?: NamedProfile } {
  const data = readProfiles(profilesPath(env));
  if (named !== undefined) {
    const profile = data.profiles[named];
    if (!profile) {
      const known = Object.keys(data.profiles).sort();
      throw new UserError(`No profile "${named}"`, {
        hint: `Create it with \`svc login --profile ${named} --url <service URL>\`${known.length > 0 ? `; known profiles: ${known.join(", ")}` : ""}.`,
      });
    }
    return { named: { name: named, profile } };
  }
  const current = data.current !== undefined ? data.profiles[data.current] : undefined;
  return current ? { current: { name: data.current!, profile: current } } : {};
}

/** What the rule reads; each absent when not set. */
export interface TargetInputs {
  /** SVC_API_URL and SVC_API_KEY (environment, else .env). */
  apiUrl?: string;
  apiKey?: string;
  named?: NamedProfile;
  current?: NamedProfile;
  /** A running `svc dev` session of the project: its address, key and environment. */
  session?: { url: string; apiKey: string; env: string };
  /** The environment the command names (--env, SVC_ENV). */
  env?: string;
}

export interface TargetChoice {
  source: "environment" | "profile" | "dev-session" | "default";
  url: string;
  apiKey?: string;
  /** The profile's name, when source is "profile". */
  profile?: string;
  /** A dev session runs but the named environment is not its own, so it was passed over. */
  passedOverSession?: { url: string; env: string };
}

/** The rule above. Pure. */
export function chooseTarget(i: TargetInputs): TargetChoice {
  const url = (u: string) => u.replace(/\/+$/, "");
  if (i.apiUrl !== undefined) return { source: "environment", url: url(i.apiUrl), apiKey: i.apiKey };
  if (i.named) return { source: "profile", url: url(i.named.profile.url), apiKey: i.named.profile.apiKey, profile: i.named.name };
  const session = i.session;
  if (session && i.env === session.env) return { source: "dev-session", url: url(session.url), apiKey: session.apiKey };
  if (i.current) return { source: "profile", url: url(i.current.profile.url), apiKey: i.current.profile.apiKey, profile: i.current.name };
  if (session && i.env === undefined) return { source: "dev-session", url: url(session.url), apiKey: session.apiKey };
  return {
    source: "default",
    url: DEFAULT_API_URL,
    apiKey: i.apiKey,
    ...(session ? { passedOverSession: { url: url(session.url), env: session.env } } : {}),
  };
}

/** The local service's address, where nothing else is configured. */
export const DEFAULT_API_URL = "http://127.0.0.1:8600";

/** How a choice reads in the line every command prints on stderr, and in `svc whoami`. Pure. */
export function describeChoice(choice: TargetChoice): string {
  switch (choice.source) {
    case "environment":
      return "SVC_API_URL";
    case "profile":
      return `profile "${choice.profile}"`;
    case "dev-session":
      return "the svc dev session of this project";
    case "default":
      return "the local service: no SVC_API_URL, no profile";
  }
}
