// `svc deploy` as a library: build, make sure the app and environment exist, upload the artifact
// (skipped when the service already has these bytes), ask the service for the plan, confirm destructive steps,
// activate. The service decides what exists; nothing here keeps local state.

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { buildProject, type BuildResult } from "../build/index.js";
import { discover } from "../build/discover.js";
import { appNameOf, buildManifest } from "../build/manifest.js";
import { UsageError, UserError } from "../errors.js";
import { envSetting } from "svc/internal";
import { curlFor } from "./access.js";
import { chooseEnvironment, DEPLOY_NAME_RULE, isDeployName, unknownEnvironment } from "./names.js";
import {
  DeployClient,
  serviceAddress,
  type ConfigChange,
  type EnvironmentInfo,
  type PlanInfo,
  type PlannedEndpoint,
  type ReleaseInfo,
  type ServiceAddress,
} from "./client.js";
import { followRelease, releaseFailure } from "./release.js";

/** Endpoints a plan removes, as the confirmation question and the non-interactive error name them. */
export function describeRemoval(plan: Pick<PlanInfo, "remove">, app: string, env: string): string {
  return `removes ${plan.remove.length} endpoint(s) from app "${app}", environment "${env}": ${plan.remove.map((r) => r.name).join(", ")}`;
}

/** The service's naming rule, checked here so a bad name fails before the build (not after the upload). */
export function checkDeployName(kind: "app" | "environment", name: string): void {
  if (isDeployName(name)) return;
  const where = kind === "app" ? "--app or SVC_APP (default: the package.json name)" : "--env or SVC_ENV";
  throw new UsageError(`Invalid ${kind} name "${name}": ${kind} names are ${DEPLOY_NAME_RULE}`, `Pick another with ${where}.`);
}

export interface DeployOptions {
  root: string;
  env?: string;
  app?: string;
  exclude?: string[];
  dryRun?: boolean;
  yes?: boolean;
  /** May the deploy ask (a TTY, no CI)? Without, a destructive step needs `yes`. */
  interactive: boolean;
  confirm?: (question: string) => Promise<boolean>;
  onProgress?: (label: string) => void;
  onUpload?: (sent: number, total: number) => void;
  address?: ServiceAddress;
  /** What the printed curls put after `Bearer` (default `$SVC_API_KEY`: the key is in the user's environment). */
  apiKeyShown?: string;
  /** Return once the release began, without waiting for its new workers (the outcome: `svc env get`). */
  detach?: boolean;
  /** The release as its new workers come up (each time it changes). */
  onRelease?: (release: ReleaseInfo) => void;
}

export interface DeployResult {
  app: string;
  env: string;
  url: string;
  dryRun: boolean;
  createdEnvironment: boolean;
  /** `uploaded`: sent by this deploy; `onService`: the service has these bytes (checked in a dry run too). */
  build: { id: string; size: number; fingerprint: string; uploaded: boolean; onService: boolean };
  endpoints: Array<PlannedEndpoint & { curl: string }>;
  removed: Array<{ name: string; id: string }>;
  /** One ready-to-paste command for the first endpoint. */
  curl: string | null;
  warnings: string[];
  /** The release this deploy made (live; starting with --detach), when the service keeps releases. */
  release?: ReleaseInfo;
}

function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (d) => hash.update(d))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}

export async function deploy(options: DeployOptions): Promise<DeployResult> {
  const address = options.address ?? serviceAddress(options.root, options.env);
  const client = new DeployClient(address);
  const progress = options.onProgress ?? (() => undefined);
  // Ask the service first: a wrong URL or key fails before a long build.
  // The manifest's app name is appNameOf(root) too: the environment is settled before a long build.
  const app = options.app ?? envSetting("SVC_APP") ?? appNameOf(options.root);
  checkDeployName("app", app);
  const environments = await client.environments(app);
  const env = chooseEnvironment(
    options.env ?? envSetting("SVC_ENV"),
    (environments ?? []).map((e) => e.env),
    app,
  );
  checkDeployName("environment", env);
  const exists = environments?.some((e) => e.env === env) ?? false;
  const build: BuildResult = await buildProject(options.root, { exclude: options.exclude, onProgress: progress });

  const sha256 = await sha256File(build.artifactPath);
  const size = (await stat(build.artifactPath)).size;
  let uploaded = false;
  let createdEnvironment = false;
  // A removal nobody can confirm (no TTY, or CI) is refused before anything is stored or uploaded: the plan of
  // the manifest alone says what would go.
  if (!options.dryRun && exists && !options.yes && (!options.interactive || !options.confirm)) {
    const preview = await client.plan(app, env, sha256, build.manifest);
    if (preview.remove.length > 0) {
      throw new UsageError(`This deploy ${describeRemoval(preview, app, env)}; nothing was changed`, "Pass --yes to confirm removing them.");
    }
  }
  if (!options.dryRun) {
    createdEnvironment = (await client.ensureEnvironment(app, env)).created;
  }
  // An app the service does not know has no builds (hasBuild would be a 404 about the app).
  const onService = environments !== null && (await client.hasBuild(app, sha256));
  if (!options.dryRun && !onService) {
    progress(`Uploading ${build.artifactPath} (${size} bytes)`);
    await client.upload(app, { path: build.artifactPath, size, sha256 }, { onProgress: options.onUpload });
    uploaded = true;
  }

  let plan: PlanInfo;
  let release: ReleaseInfo | undefined;
  if (exists || !options.dryRun) {
    plan = await client.plan(app, env, sha256, options.dryRun ? build.manifest : undefined);
  } else {
    // A dry run against an environment that does not exist yet: everything would be created.
    plan = {
      applied: false,
      remove: [],
      endpoints: Object.entries(build.manifest.resources).map(([name, r]) => ({
        name,
        id: "",
        url: "",
        type: r.is_load_balanced ? "lb" : "queue",
        action: "create",
        routes: Object.keys(build.manifest.routes[name] ?? {}).sort(),
      })),
    };
  }

  if (!options.dryRun) {
    if (plan.remove.length > 0 && !options.yes) {
      const what = describeRemoval(plan, app, env);
      if (!options.interactive || !options.confirm) {
        throw new UsageError(`This deploy ${what}; nothing was changed`, "Pass --yes to confirm removing them.");
      }
      if (!(await options.confirm(`This deploy ${what}. Continue?`))) throw new UserError("Deploy cancelled; nothing was changed");
    }
    progress(`Provisioning ${plan.endpoints.length} endpoint(s) in ${app}/${env}`);
    const activated = await client.activate(
      app,
      env,
      sha256,
      plan.remove.map((r) => r.name),
    );
    plan = activated;
    release = activated.release;
    if (release?.state === "starting" && !options.detach) release = await followRelease(client, release, options.onRelease);
    if (release && release.state !== "live" && release.state !== "starting") throw releaseFailure(release);
  }

  const endpoints = plan.endpoints.map((e) => ({ ...e, curl: e.url ? curlFor(e, options.apiKeyShown) : "" }));
  const first = endpoints.find((e) => e.type === "queue" && e.url) ?? endpoints.find((e) => e.url);
  return {
    app,
    env,
    url: address.url,
    dryRun: Boolean(options.dryRun),
    createdEnvironment,
    build: { id: sha256, size, fingerprint: build.manifest.fingerprint, uploaded, onService: onService || uploaded },
    endpoints,
    removed: plan.remove,
    curl: first ? first.curl : null,
    warnings: [...build.warnings, ...(plan.warnings ?? [])],
    ...(release ? { release } : {}),
  };
}

/** App of a lifecycle command: --app, SVC_APP, else the project's. */
export function resolveApp(flag: string | undefined, root: string): string {
  return flag ?? envSetting("SVC_APP") ?? appNameOf(root);
}

/** Environment of a lifecycle command: --env, SVC_ENV, else the app's only one. */
export async function resolveExistingEnvironment(client: DeployClient, app: string, flag: string | undefined, command: string): Promise<EnvironmentInfo> {
  const environments = await client.environments(app);
  if (environments === null) throw new UserError(`No app "${app}" on ${client.address.url}`, { hint: "Deploy it with `svc deploy`, or pass --app." });
  const wanted = flag ?? envSetting("SVC_ENV");
  if (!wanted && environments.length === 0) throw new UserError(`App "${app}" has no environments`, { hint: "Create one with `svc deploy --env <name>`." });
  const name = chooseEnvironment(
    wanted,
    environments.map((e) => e.env),
    app,
    command,
  );
  const found = environments.find((e) => e.env === name);
  if (!found) {
    throw unknownEnvironment(
      app,
      name,
      environments.map((e) => e.env),
    );
  }
  return found;
}

export interface UpdateResult {
  app: string;
  env: string;
  dryRun: boolean;
  changes: ConfigChange[];
}

/** `svc update`: the configuration in the code (discovered statically, no build) applied to a deployed environment. */
export async function updateConfig(options: { root: string; app?: string; env?: string; dryRun?: boolean; address?: ServiceAddress }): Promise<UpdateResult> {
  const client = new DeployClient(options.address ?? serviceAddress(options.root, options.env));
  const app = resolveApp(options.app, options.root);
  const environment = await resolveExistingEnvironment(client, app, options.env, "svc update");
  const discovery = await discover(options.root);
  if (discovery.endpoints.length === 0) throw new UserError("No endpoint functions found", { problems: discovery.warnings });
  const manifest = buildManifest({ app, fingerprint: "", endpoints: discovery.endpoints, dependencies: {}, excluded: [] });
  const answer = await client.config(app, environment.env, manifest.resources, Boolean(options.dryRun));
  return { app, env: environment.env, dryRun: answer.dryRun, changes: answer.changes };
}
