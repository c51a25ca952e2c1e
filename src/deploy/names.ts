// App and environment names: the rule the service enforces on /v1/apps (checkName in
// src/service/deploy/routes.ts), dependency-free so the CLI checks a name before a long build and the service
// can share it. And which environment a command means when none is named.

import { UsageError, UserError } from "../errors.js";

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** The rule in words, for error messages ("app names are ..."). */
export const DEPLOY_NAME_RULE = '1-63 characters: lowercase letters, digits, ".", "_", "-", starting with a letter or digit';

export function isDeployName(name: string): boolean {
  return NAME.test(name);
}

export const DEFAULT_ENVIRONMENT = "production";

/**
 * Which environment a deploy targets: the flag; else the app's only environment; `production` when it has
 * none; an error listing them when there are several.
 */
export function chooseEnvironment(flag: string | undefined, existing: readonly string[], app: string, command = "svc deploy"): string {
  if (flag) return flag;
  if (existing.length === 0) return DEFAULT_ENVIRONMENT;
  if (existing.length === 1) return existing[0]!;
  throw new UsageError(
    `App "${app}" has ${existing.length} environments (${existing.join(", ")}); say which one with --env`,
    `For example: \`${command} --env ${existing[0]}\`.`,
  );
}

/**
 * An environment the app does not have, named by --env or SVC_ENV: the ones it has, and how to make a new one.
 * Pure.
 */
export function unknownEnvironment(app: string, env: string, existing: readonly string[]): UserError {
  return new UserError(`No environment "${env}" in ${app} (it has: ${existing.join(", ") || "none"})`, {
    hint:
      existing.length > 0
        ? `Name one of them with --env (or SVC_ENV); \`svc deploy --env ${env}\` creates "${env}".`
        : `\`svc deploy --env ${env}\` creates it.`,
  });
}
