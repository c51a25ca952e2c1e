// Before a release is activated: every secret its endpoints name must be set (in their scope), so a deploy never
// starts workers that would run without a value they need.

import type { ManifestResource } from "svc/internal";
import type { Secrets } from "./index.js";

/** One line per endpoint and missing secret, with the command that sets it; empty when all are set. */
export function missingSecrets(secrets: Secrets | undefined, userId: string, app: string, env: string, resources: Record<string, ManifestResource>): string[] {
  const problems: string[] = [];
  for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const wanted = resource.secrets ?? [];
    if (wanted.length === 0) continue;
    const missing = secrets ? secrets.resolve(userId, app, env, wanted).missing : wanted;
    for (const secret of missing) {
      problems.push(
        `endpoint "${name}" needs secret ${secret}, which is not set: \`svc secret set ${secret}\` (all apps) or \`svc secret set ${secret} --app ${app} --env ${env}\``,
      );
    }
  }
  return problems;
}
