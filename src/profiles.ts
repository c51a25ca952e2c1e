// Named service targets (URL + API key) kept in the user's config directory, so one shell can address a staging
// and a production service without exporting a pair of variables per shell. The file holds secrets: it is
// written with mode 0600 in a 0700 directory, atomically (a crash mid-write leaves the previous file).
//
// Which profile a command uses: --profile, else SVC_PROFILE, else the current one (the first login's, or the last
// `svc login` that named none). SVC_API_URL / SVC_API_KEY still win over any profile, for CI.

import { chmodSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { profilesPath, storedProfiles, type NamedProfile, type Profile, type ProfilesFile } from "svc/internal";
import { UserError } from "./errors.js";

// The file's format and its reading are the SDK's (svc/internal), which scripts use to find the service too.
export { configDir, profilesPath, readProfiles, type Profile, type ProfilesFile } from "svc/internal";

export const DEFAULT_PROFILE = "default";
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function checkProfileName(name: string): string {
  if (!PROFILE_NAME.test(name)) {
    throw new UserError(`"${name}" is not a profile name`, { hint: "Use letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit." });
  }
  return name;
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
export function activeProfile(env: NodeJS.ProcessEnv = process.env): NamedProfile | undefined {
  const { named, current } = storedProfiles(namedProfile(env), env);
  return named ?? current;
}
