// Named service targets (URL + API key) kept in the user's config directory, so one shell can address a staging
// and a production service without exporting a pair of variables per shell. The file holds secrets: it is
// written with mode 0600 in a 0700 directory, atomically (a crash mid-write leaves the previous file).
//
// Which profile a command uses: --profile, else SVC_PROFILE, else the current one (the first login's, or the last
// `svc login` that named none). SVC_API_URL / SVC_API_KEY still win over any profile, for CI.

import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { UserError } from "./errors.js";

export const DEFAULT_PROFILE = "default";
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

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

export function checkProfileName(name: string): string {
  if (!PROFILE_NAME.test(name)) {
    throw new UserError(`"${name}" is not a profile name`, { hint: "Use letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit." });
  }
  return name;
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

export function writeProfiles(data: ProfilesFile, file = profilesPath()): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
  // An existing temp file (another run's leftover) keeps its old mode: set it again.
  chmodSync(temp, 0o600);
  renameSync(temp, file);
}

/** The store after saving `profile` as `name`: it becomes current when asked, or when there was none. Pure. */
export function withProfile(data: ProfilesFile, name: string, profile: Profile, makeCurrent: boolean): ProfilesFile {
  const current = makeCurrent || !data.current || !data.profiles[data.current] ? name : data.current;
  return { current, profiles: { ...data.profiles, [name]: profile } };
}

/** The store after removing `name`; the current one moves to another profile, if any is left. Pure. */
export function withoutProfile(data: ProfilesFile, name: string): ProfilesFile {
  const profiles = { ...data.profiles };
  delete profiles[name];
  const left = Object.keys(profiles).sort();
  const current = data.current === name ? left[0] : data.current;
  return { current, profiles };
}

// The --profile flag of this run (set once by the entry point before a command runs).
let selectedByFlag: string | undefined;

export function selectProfile(name: string | undefined): void {
  selectedByFlag = name === undefined ? undefined : checkProfileName(name);
}

/** The profile named for this run (--profile or SVC_PROFILE), if any. */
export function namedProfile(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return selectedByFlag ?? (env.SVC_PROFILE || undefined);
}

/**
 * The profile this run uses: the named one (an error when it does not exist: a typo must not send a production
 * command elsewhere), else the current one, else none.
 */
export function activeProfile(env: NodeJS.ProcessEnv = process.env): { name: string; profile: Profile } | undefined {
  const named = namedProfile(env);
  const data = readProfiles(profilesPath(env));
  if (named !== undefined) {
    const profile = data.profiles[named];
    if (!profile) {
      const known = Object.keys(data.profiles).sort();
      throw new UserError(`No profile "${named}"`, {
        hint: `Create it with \`svc login --profile ${named} --url <service URL>\`${known.length > 0 ? `; known profiles: ${known.join(", ")}` : ""}.`,
      });
    }
    return { name: named, profile };
  }
  if (data.current && data.profiles[data.current]) return { name: data.current, profile: data.profiles[data.current]! };
  return undefined;
}
