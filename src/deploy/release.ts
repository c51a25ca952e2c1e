// Following a release from the CLI: the service starts the new workers of the endpoints a build creates or
// changes and switches only once they are up (docs/deploy.md, Releases). `svc deploy` and `svc rollback` wait for
// that outcome and tell it: which endpoint failed, the worker's own error, and what still serves.

import { UserError } from "../errors.js";
import type { DeployClient, ReleaseInfo } from "./client.js";

/** How often the release is read while its new workers come up. */
export const RELEASE_POLL_MS = 300;

/** Wait until the release is live, failed or superseded; `onChange` hears each new state. */
export async function followRelease(
  client: DeployClient,
  started: ReleaseInfo,
  onChange?: (release: ReleaseInfo) => void,
  pollMs = RELEASE_POLL_MS,
): Promise<ReleaseInfo> {
  let current = started;
  let seen = JSON.stringify(current);
  onChange?.(current);
  while (current.state === "starting") {
    await new Promise((resolve) => setTimeout(resolve, pollMs));
    const found = (await client.releases(current.app, current.env)).find((r) => r.id === current.id);
    if (!found) throw new UserError(`Release ${current.id} of ${current.app}/${current.env} is no longer on the service (was the environment deleted?)`);
    current = found;
    const text = JSON.stringify(current);
    if (text !== seen) {
      seen = text;
      onChange?.(current);
    }
  }
  return current;
}

/** The error of a release that did not switch: the endpoint, the worker's error (its first lines), what serves. */
export function releaseFailure(release: ReleaseInfo): UserError {
  const where = `${release.app}/${release.env}`;
  const serving = release.previousBuildId
    ? `the previous build (${release.previousBuildId.slice(0, 12)}) is still serving`
    : "nothing was deployed (the environment had no build before)";
  if (release.state === "superseded") {
    return new UserError(`Another deploy of ${where} began before this one switched; this one was dropped`, {
      hint: "See which build runs with `svc env get`.",
    });
  }
  const endpoint = release.error?.endpoint;
  const message = release.error?.message ?? "unknown error";
  return new UserError(
    endpoint ? `The release failed: endpoint "${endpoint}" could not start its new workers; ${serving}` : `The release failed: ${message}; ${serving}`,
    {
      // One problem: the worker's error with its stack lines indented under it.
      problems: endpoint ? [message.split("\n").join("\n    ")] : [],
      hint: endpoint
        ? `Fix the error and deploy again. The endpoint's logs: svc logs ${endpoint} --app ${release.app} --env ${release.env}`
        : "Deploy again; `svc env get` shows the environment's releases.",
    },
  );
}
