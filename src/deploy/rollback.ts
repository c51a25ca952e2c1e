// `svc rollback` as a library: make the environment's previous build (or a named one) active again. It is a
// release like any deploy: the endpoints it changes start new workers first and switch only once they are up.

import { UsageError, UserError } from "../errors.js";
import { describeRemoval, resolveApp, resolveExistingEnvironment } from "./index.js";
import { DeployClient, serviceAddress, type ReleaseInfo, type ServiceAddress } from "./client.js";
import { followRelease, releaseFailure } from "./release.js";

const FULL_SHA = /^[a-f0-9]{64}$/;

/**
 * Which build a rollback activates: `to` (a build id or a prefix of one the environment ran), else the newest
 * build that went live in this environment and is not the one it runs now. Pure.
 */
export function chooseRollbackTarget(releases: ReleaseInfo[], current: string | null, to?: string): string {
  if (to !== undefined) {
    const wanted = to.toLowerCase();
    if (FULL_SHA.test(wanted)) return wanted;
    const matches = [...new Set(releases.map((r) => r.buildId).filter((id) => id.startsWith(wanted)))];
    if (matches.length === 1) return matches[0]!;
    if (matches.length > 1)
      throw new UsageError(`--to ${to} matches ${matches.length} builds: ${matches.map((m) => m.slice(0, 12)).join(", ")}`, "Give more of the build id.");
    throw new UsageError(
      `No build starting with "${to}" was released in this environment`,
      "`svc env get` lists its releases; give a full build id to roll back to any uploaded build.",
    );
  }
  // The newest build that went live before the one running (a release it replaced, or another live one).
  const previous = releases.find((r) => (r.state === "live" || r.state === "replaced") && r.buildId !== current);
  if (!previous)
    throw new UserError("This environment has no earlier build that went live", { hint: "`svc env get` lists its releases; pass --to <build> to pick one." });
  return previous.buildId;
}

export interface RollbackOptions {
  root: string;
  app?: string;
  env?: string;
  to?: string;
  yes?: boolean;
  interactive: boolean;
  confirm?: (question: string) => Promise<boolean>;
  detach?: boolean;
  onRelease?: (release: ReleaseInfo) => void;
  address?: ServiceAddress;
}

export interface RollbackResult {
  app: string;
  env: string;
  /** The build the environment ran, and the one it runs now (or will, with --detach). */
  from: string | null;
  to: string;
  release?: ReleaseInfo;
}

export async function rollback(options: RollbackOptions): Promise<RollbackResult> {
  const client = new DeployClient(options.address ?? serviceAddress(options.root, options.env));
  const app = resolveApp(options.app, options.root);
  const environment = await resolveExistingEnvironment(client, app, options.env, "svc rollback");
  const env = environment.env;
  const target = chooseRollbackTarget(await client.releases(app, env), environment.build, options.to);
  if (target === environment.build) throw new UserError(`${app}/${env} already runs build ${target.slice(0, 12)}`);
  const plan = await client.plan(app, env, target);
  if (plan.remove.length > 0 && !options.yes) {
    const what = describeRemoval(plan, app, env);
    if (!options.interactive || !options.confirm) throw new UsageError(`This rollback ${what}; nothing was changed`, "Pass --yes to confirm removing them.");
    if (!(await options.confirm(`This rollback ${what}. Continue?`))) throw new UserError("Rollback cancelled; nothing was changed");
  }
  const activated = await client.activate(
    app,
    env,
    target,
    plan.remove.map((r) => r.name),
    { rollback: true },
  );
  let release = activated.release;
  if (release?.state === "starting" && !options.detach) release = await followRelease(client, release, options.onRelease);
  if (release && release.state !== "live" && release.state !== "starting") throw releaseFailure(release);
  return { app, env, from: environment.build, to: target, ...(release ? { release } : {}) };
}
