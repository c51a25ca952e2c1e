// App and environment names: the rule the service enforces on /v1/apps (checkName in
// src/service/deploy/routes.ts), dependency-free so the CLI checks a name before a long build and the service
// can share it.

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** The rule in words, for error messages ("app names are ..."). */
export const DEPLOY_NAME_RULE = '1-63 characters: lowercase letters, digits, ".", "_", "-", starting with a letter or digit';

export function isDeployName(name: string): boolean {
  return NAME.test(name);
}
