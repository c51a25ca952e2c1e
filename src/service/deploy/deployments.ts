// What changes which code an environment runs: uploading a build, planning and activating it, removing
// endpoints, applying configuration. The HTTP routes (routes.ts) and `svc dev`'s in-process deploy
// (Service.deploy in index.ts) both call this module, so a deploy behaves the same whichever way it comes; they
// only parse their input and say the outcome their way. Nothing here knows HTTP.
//
// How a deploy goes:
//   1. plan      Which endpoints the build creates, updates, keeps and removes: planActivation (plan.ts, pure)
//                over the endpoints the environment runs.
//   2. checks    What would make its workers fail or reach what is not theirs is refused before anything
//                starts: reserved variables, scaling policies, network volumes, unset secrets, missing GPUs.
//   3. release   ReleaseManager.begin (releases/manager.ts) asks the scaler (scaler.ts) for one probe worker per
//                created or changed endpoint; the scaler starts it through the driver. The worker routes tell
//                the manager when each probe came up (queue: it registered; load-balanced: /ping answered).
//   4. switch    When every probe is up the manager calls `switchOver` here: removed endpoints go, the new rows,
//                the environment's build and the release record are written in one batch, and the registry
//                serves the new rows. The probes become the endpoints' workers. A probe out of attempts fails
//                the release instead: nothing switched, the previous build keeps serving.
//   5. after     The scaler reconciles (old workers drain), management re-plans the REST endpoints that run
//                this code, and the removed endpoints' workers are awaited until they exited.

import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { chmod, copyFile, mkdir, rename, stat } from "node:fs/promises";
import { join } from "node:path";
import { UserError, errorMessage } from "../../errors.js";
import { gpuShortfalls, type HostGpus } from "../../gpus/host.js";
import { endpointImageOf, type Manifest, type ManifestResource } from "svc/internal";
import type { ArtifactStore } from "../artifacts/store.js";
import type { EndpointRegistry } from "../endpoints/registry.js";
import { planDeploy } from "../endpoints/rows.js";
import type { VolumeRecord } from "../management/store.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../store/private-files.js";
import type { ReleaseManager } from "../releases/manager.js";
import type { Scaler } from "../workers/scaler.js";
import { missingSecrets } from "../secrets/check.js";
import type { Secrets } from "../secrets/index.js";
import type { EndpointRow, StoreOp } from "../store/types.js";
import { planActivation, planConfigUpdate, type ActivationPlan, type ConfigChange } from "./plan.js";
import { imageProblemsInResources, largeOutputProblemsInResources, reservedEnvInResources, scalerProblemsInResources } from "./resource-rules.js";
import type { BuildRow, DeployStoreReads, EnvironmentRow, ReleaseRow } from "../store/deploy-rows.js";

/** Removing endpoints finishes only once their workers have exited, or fails after this long. */
export const WORKERS_GONE_TIMEOUT_MS = 30_000;

export interface DeploymentsDeps {
  /** Apps, environments, builds and releases as stored. */
  store: DeployStoreReads;
  /** Write a batch (the job engine's writer: what it serves and the store stay in step). */
  write(ops: StoreOp[]): Promise<void>;
  /** Forget a removed endpoint's jobs and logs (the job engine). */
  dropEndpoint(endpointId: string): Promise<void>;
  /** The endpoints served: changed through upsert/remove. */
  endpoints: EndpointRegistry;
  /** Where the service keeps artifacts (`<dataDir>/artifacts`). */
  dataDir: string;
  /** Makes a kept artifact reachable from every replica. */
  artifacts: Pick<ArtifactStore, "publish">;
  /** Surge, then switch (releases/manager.ts). */
  releases: Pick<ReleaseManager, "begin">;
  /** The scaler, where this service runs workers (none: workers come from outside, nothing to wait for). */
  scaler(): (Pick<Scaler, "reconcile" | "stopWorkersOf"> & Partial<Pick<Scaler, "runsImages" | "pullsImages" | "hasImage" | "probeWait">>) | undefined;
  /** Network volumes and REST endpoints (the management API), where the service has it. */
  management?: DeployManagement;
  /** Users' secrets: a release whose endpoints name unset ones is refused. */
  secrets?: Secrets;
  /** This host's GPUs, where workers run here: a release asking for more than it has is refused. */
  gpus(): HostGpus | undefined;
  log(message: string): void;
  /** How long removing endpoints waits for their workers (default WORKERS_GONE_TIMEOUT_MS). */
  workersGoneTimeoutMs?: number;
}

/** What a deploy needs of the management layer. */
export interface DeployManagement {
  /** The network volumes the endpoints name: those to create for the user, and names they may not use. */
  deployVolumes(userId: string, resources: Record<string, { volume?: string | null }>): { create: VolumeRecord[]; errors: string[] };
  createVolumes(volumes: VolumeRecord[]): Promise<void>;
  /** An app's code changed: REST endpoints whose template runs it follow. */
  appChanged(): Promise<void>;
}

/** One environment of one user's app. */
export interface EnvironmentRef {
  userId: string;
  app: string;
  env: string;
}

/** Which check refused a release (the edges word it for their callers). */
export type ReleaseCheck = "reserved-env" | "scaler" | "large-outputs" | "volumes" | "secrets" | "gpus" | "images";

/**
 * A deploy operation refused (nothing changed), or, for "workers-running", one that changed what it should but
 * whose removed endpoints' workers had not exited in time. `problems`: one line per fault.
 */
export class DeployError extends UserError {
  constructor(
    readonly failure: "not-found" | "invalid" | "conflict" | "workers-running",
    message: string,
    problems: string[] = [],
    readonly check?: ReleaseCheck,
  ) {
    super(message, { problems });
  }
}

/** A release whose new workers could not start: nothing switched, the previous build keeps serving. */
export class ReleaseFailedError extends UserError {
  constructor(readonly release: ReleaseRow) {
    const why = release.error;
    super(
      release.state === "superseded"
        ? "A newer deploy of this environment took over before this one switched"
        : why?.endpoint
          ? `Endpoint "${why.endpoint}" of the new build could not start`
          : `The new build could not be switched to: ${why?.message ?? "unknown error"}`,
      { problems: why?.endpoint ? [why.message.split("\n").join("\n    ")] : [] },
    );
  }
}

/** An artifact on this machine, with the manifest read from it. */
export interface ArtifactFile {
  sha256: string;
  size: number;
  path: string;
  manifest: Manifest;
}

export interface PlanRequest {
  /** The build's id (its sha256). */
  build: string;
  /** A dry run may plan a build not uploaded yet from its manifest. */
  manifest?: unknown;
}

export interface ActivateRequest {
  build: string;
  /** Names of the endpoints the caller agrees to remove; any other the build removes refuses the activation (409). */
  confirmRemove: readonly string[];
  rollback?: boolean;
}

export interface Activation {
  build: BuildRow;
  plan: ActivationPlan;
  /** The release as it began: live already when no new worker had to start, else starting. */
  release: ReleaseRow;
  /**
   * The release live and settled: the scaler reconciled, management told, the removed endpoints' workers gone.
   * Rejects with ReleaseFailedError (nothing switched) or DeployError "workers-running". These steps run whether
   * or not the caller waits; a failure nobody waited for is logged.
   */
  done: Promise<ReleaseRow>;
}

export interface RemovedEndpoint {
  name: string;
  id: string;
  env: string;
}

/** What a release switches: rows written and served, rows whose new workers must start first, rows removed. */
interface Switch {
  write: EndpointRow[];
  probe: EndpointRow[];
  remove: EndpointRow[];
}

const SHA = /^[a-f0-9]{64}$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export class Deployments {
  constructor(private readonly deps: DeploymentsDeps) {}

  /** An environment as stored, or undefined. */
  /**
   * What a deploy is told of this host: GPU endpoints whose workers run on its CPU, where the workers run here and
   * it has no GPU. Pure of I/O.
   */
  hostWarnings(resources: Record<string, ManifestResource>): string[] {
    const gpus = this.deps.gpus();
    if (!gpus || gpus.inventory.gpus.length > 0) return [];
    const gpuEndpoints = Object.entries(resources)
      .filter(([, r]) => r.computeType === "GPU")
      .map(([name]) => name)
      .sort();
    if (gpuEndpoints.length === 0) return [];
    return [`This service's host has no GPU: the workers of ${gpuEndpoints.join(", ")} run on its CPU (svc doctor and GET /v1/gpus say what it found)`];
  }

  /** Releases as answered: a starting one's endpoints say why their new workers wait, where they wait for a GPU. */
  withWaits(releases: readonly ReleaseRow[]): ReleaseRow[] {
    const scaler = this.deps.scaler();
    if (!scaler?.probeWait) return [...releases];
    return releases.map((r) =>
      r.state !== "starting"
        ? r
        : {
            ...r,
            endpoints: r.endpoints.map((e) => {
              const waiting = e.state === "starting" ? scaler.probeWait!(e.id)?.text : undefined;
              return waiting ? { ...e, waiting } : e;
            }),
          },
    );
  }

  async environment(ref: EnvironmentRef): Promise<EnvironmentRow | undefined> {
    return (await this.deps.store.environments(ref.userId, ref.app)).find((e) => e.name === ref.env);
  }

  /** The endpoints an environment (or, without `env`, an app) runs, by name. */
  endpointsOf(userId: string, app: string, env?: string): EndpointRow[] {
    return [...this.deps.endpoints.values()]
      .filter((e) => e.userId === userId && e.app === app && (env === undefined || e.env === env))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Record an artifact the service keeps as a build of `app` (the app too, when new); reachable from every replica first. */
  async upload(userId: string, app: string, artifact: ArtifactFile): Promise<BuildRow> {
    await this.deps.artifacts.publish(artifact.path);
    const now = Date.now();
    const build: BuildRow = {
      id: artifact.sha256,
      userId,
      app,
      size: artifact.size,
      fingerprint: artifact.manifest.fingerprint,
      manifest: artifact.manifest,
      path: artifact.path,
      createdAt: now,
    };
    await this.deps.write([
      { op: "upsertApp", app: { userId, name: app, createdAt: now } },
      { op: "insertBuild", build },
    ]);
    return build;
  }

  /** What activating a build would do; refused as activating it would be, short of secrets and GPUs. */
  async plan(ref: EnvironmentRef, request: PlanRequest): Promise<{ build: BuildRow; plan: ActivationPlan }> {
    const environment = await this.requireEnvironment(ref);
    let build = SHA.test(request.build) ? await this.deps.store.build(ref.userId, request.build) : undefined;
    // A dry run plans a build the service does not have yet from its manifest; only activation needs the bytes.
    if (!build && SHA.test(request.build) && isObject(request.manifest) && isObject(request.manifest.resources)) {
      const manifest = request.manifest as unknown as Manifest;
      manifest.routes ??= {};
      build = {
        id: request.build,
        userId: ref.userId,
        app: ref.app,
        size: 0,
        fingerprint: String(manifest.fingerprint),
        manifest,
        path: "",
        createdAt: Date.now(),
      };
    }
    const checked = this.checkBuild(ref, build, request.build);
    return { build: checked.build, plan: await this.planFor(ref, environment, checked.build) };
  }

  /**
   * Activate an uploaded build: checks, then a release (surge, then switch). Returns once the release began; its
   * `done` settles when it is live and what it removed has stopped.
   */
  async activate(ref: EnvironmentRef, request: ActivateRequest): Promise<Activation> {
    const environment = await this.requireEnvironment(ref);
    const stored = SHA.test(request.build) ? await this.deps.store.build(ref.userId, request.build) : undefined;
    const { build, volumes } = this.checkBuild(ref, stored, request.build);
    const plan = await this.planFor(ref, environment, build);
    this.checkRelease(ref, build.manifest.resources);
    const confirmed = new Set(request.confirmRemove);
    const unconfirmed = plan.remove.filter((r) => !confirmed.has(r.name));
    if (unconfirmed.length > 0) {
      throw new DeployError(
        "conflict",
        "Activating this build removes endpoints that were not confirmed",
        unconfirmed.map((r) => `would remove endpoint "${r.name}" (${r.id})`),
      );
    }
    await this.checkImages(build.manifest.resources);
    // Volumes its endpoints name that the user does not have yet: theirs from now on, kept like any volume.
    await this.deps.management?.createVolumes(volumes);
    const { release, done } = await this.release(environment, build, request.rollback === true ? "rollback" : "deploy", {
      write: plan.upsert,
      probe: plan.upsert,
      remove: plan.removeRows,
    });
    return { build, plan, release, done };
  }

  /**
   * `svc dev` and in-process callers: a build from a local file (kept under the data directory by its sha256, so
   * the caller may overwrite its file), activated at once in its environment, created when absent; endpoints the
   * code no longer has are removed without asking. Every endpoint's row follows the new artifact; only those
   * whose revision changed start new workers. Resolves with the rows served once the release is live.
   */
  /**
   * Deploy a build file to an environment at once (svc dev): its endpoints, and the ids of those whose workers it
   * replaced (their code or settings changed; the others keep theirs).
   */
  async deployFile(ref: EnvironmentRef, input: { manifest: Manifest; artifactPath: string }): Promise<{ endpoints: EndpointRow[]; changed: string[] }> {
    const resources = input.manifest.resources;
    const volumes = this.checkResources(ref.userId, resources);
    this.checkRelease(ref, resources);
    await this.checkImages(resources);
    const kept = await keepArtifactFile(this.deps.dataDir, input.artifactPath);
    // The manifest given is the one deployed, even where the same bytes were recorded before with another.
    const build = { ...(await this.upload(ref.userId, ref.app, { ...kept, manifest: input.manifest })), manifest: input.manifest };
    const environment = (await this.environment(ref)) ?? {
      userId: ref.userId,
      app: ref.app,
      name: ref.env,
      buildId: null,
      createdAt: Date.now(),
      activatedAt: null,
    };
    const plan = planDeploy([...this.deps.endpoints.values()], { ...ref, resources, artifactPath: build.path, artifactHash: build.id }, Date.now());
    await this.deps.management?.createVolumes(volumes);
    const { done } = await this.release(environment, build, "deploy", {
      write: plan.upsert,
      probe: plan.upsert.filter((row) => this.deps.endpoints.get(row.id)?.revision !== row.revision),
      remove: plan.remove,
    });
    await done;
    return { endpoints: plan.upsert, changed: plan.changed };
  }

  /** Remove endpoints of an environment by name, or all of them (then it runs no build any more). */
  async undeploy(ref: EnvironmentRef, request: { endpoints: readonly string[]; all: boolean }): Promise<RemovedEndpoint[]> {
    const environment = await this.requireEnvironment(ref);
    const existing = this.endpointsOf(ref.userId, ref.app, ref.env);
    const names = request.endpoints;
    if (!request.all && names.length === 0) throw new DeployError("invalid", "Say which endpoints to remove", ["send {endpoints: [name, ...]} or {all: true}"]);
    const unknown = names.filter((n) => !existing.some((e) => e.name === n));
    if (unknown.length > 0) {
      throw new DeployError("not-found", `No endpoint ${unknown.map((n) => `"${n}"`).join(", ")} in app "${ref.app}", environment "${ref.env}"`, [
        `deployed: ${existing.map((e) => e.name).join(", ") || "nothing"}`,
      ]);
    }
    const removed = await this.removeEndpoints(request.all ? existing : existing.filter((e) => names.includes(e.name)));
    // Everything gone: the environment runs no build any more, so the next deploy provisions afresh.
    if (request.all) await this.deps.write([{ op: "upsertEnvironment", environment: { ...environment, buildId: null } }]);
    return removed;
  }

  /**
   * Apply configuration from code (`svc update`) without a new build; `dryRun` only says what would change.
   * `resources` is as the caller sent it: anything but an object of endpoint configurations is refused.
   */
  async configure(ref: EnvironmentRef, request: { resources: unknown; dryRun: boolean }): Promise<ConfigChange[]> {
    await this.requireEnvironment(ref);
    const existing = this.endpointsOf(ref.userId, ref.app, ref.env);
    if (!isObject(request.resources)) throw new DeployError("invalid", "Send {resources} with each endpoint's configuration");
    const resources = request.resources as Record<string, ManifestResource>;
    const reserved = reservedEnvInResources(resources);
    if (reserved.length > 0)
      throw new DeployError(
        "invalid",
        "The configuration sets environment variables that configuration may not set; nothing was changed",
        reserved,
        "reserved-env",
      );
    const images = imageProblemsInResources(resources);
    if (images.length > 0)
      throw new DeployError("invalid", "The build names images the service cannot run as written; nothing was activated", images, "images");
    const policies = scalerProblemsInResources(resources);
    if (policies.length > 0)
      throw new DeployError("invalid", "The configuration names a scaling policy the service cannot follow; nothing was changed", policies, "scaler");
    const plan = planConfigUpdate(existing, resources, Date.now());
    if (plan.problems.length > 0) throw new DeployError("conflict", "These changes need a new build: run `svc deploy`", plan.problems);
    if (!request.dryRun && plan.rows.length > 0) {
      await this.deps.write(plan.rows.map((endpoint) => ({ op: "upsertEndpoint", endpoint }) as StoreOp));
      for (const row of plan.rows) this.deps.endpoints.upsert(row);
      this.deps.scaler()?.reconcile();
    }
    return plan.changes;
  }

  /** Create an environment (the app too) unless it exists; which of the two it is. */
  async createEnvironment(ref: EnvironmentRef): Promise<{ environment: EnvironmentRow; created: boolean }> {
    const existing = await this.environment(ref);
    if (existing) return { environment: existing, created: false };
    const now = Date.now();
    const environment: EnvironmentRow = { userId: ref.userId, app: ref.app, name: ref.env, buildId: null, createdAt: now, activatedAt: null };
    await this.deps.write([
      { op: "upsertApp", app: { userId: ref.userId, name: ref.app, createdAt: now } },
      { op: "upsertEnvironment", environment },
    ]);
    return { environment, created: true };
  }

  /** Delete an environment: its endpoints (once their workers exited), its releases, the record. */
  async deleteEnvironment(ref: EnvironmentRef): Promise<RemovedEndpoint[]> {
    if (!(await this.environment(ref))) throw new DeployError("not-found", `No app "${ref.app}" with environment "${ref.env}"`);
    const removed = await this.removeEndpoints(this.endpointsOf(ref.userId, ref.app, ref.env));
    await this.deps.write([{ op: "deleteEnvironment", userId: ref.userId, app: ref.app, name: ref.env }]);
    return removed;
  }

  /** Delete an app: every environment's endpoints (once their workers exited), its environments and builds. */
  async deleteApp(userId: string, app: string): Promise<{ environments: string[]; removed: RemovedEndpoint[] }> {
    if (!(await this.deps.store.apps(userId)).some((a) => a.name === app)) throw new DeployError("not-found", `No app "${app}"`);
    const environments = await this.deps.store.environments(userId, app);
    const removed = await this.removeEndpoints(this.endpointsOf(userId, app));
    await this.deps.write([{ op: "deleteApp", userId, name: app }]);
    return { environments: environments.map((e) => e.name), removed };
  }

  /** An environment as stored; refused as not found (saying how to create it) when there is none. */
  async requireEnvironment(ref: EnvironmentRef): Promise<EnvironmentRow> {
    const environment = await this.environment(ref);
    if (!environment) {
      throw new DeployError("not-found", `No app "${ref.app}" with environment "${ref.env}"`, [
        `create it with \`svc env create ${ref.env} --app ${ref.app}\` or \`svc deploy --env ${ref.env}\``,
      ]);
    }
    return environment;
  }

  /** The build asked for, of this app, whose endpoints may be planned; the volumes it would create. */
  private checkBuild(ref: EnvironmentRef, build: BuildRow | undefined, asked: string): { build: BuildRow; volumes: VolumeRecord[] } {
    if (!build || build.app !== ref.app)
      throw new DeployError("not-found", `No build ${asked || "(missing)"} of app "${ref.app}"`, ["upload it first: POST /v1/apps/{app}/builds"]);
    return { build, volumes: this.checkResources(ref.userId, build.manifest.resources) };
  }

  /** What no endpoint of a release may ask for, known from its manifest alone; the volumes it would create. */
  private checkResources(userId: string, resources: Record<string, ManifestResource>): VolumeRecord[] {
    const reserved = reservedEnvInResources(resources);
    if (reserved.length > 0)
      throw new DeployError("invalid", "The build sets environment variables that configuration may not set; nothing was activated", reserved, "reserved-env");
    const images = imageProblemsInResources(resources);
    if (images.length > 0)
      throw new DeployError("invalid", "The build names images the service cannot run as written; nothing was activated", images, "images");
    const policies = scalerProblemsInResources(resources);
    if (policies.length > 0)
      throw new DeployError("invalid", "The build names a scaling policy the service cannot follow; nothing was activated", policies, "scaler");
    const largeOutputs = largeOutputProblemsInResources(resources);
    if (largeOutputs.length > 0)
      throw new DeployError("invalid", "The build asks for large outputs it cannot have; nothing was activated", largeOutputs, "large-outputs");
    const volumes = this.deps.management?.deployVolumes(userId, resources) ?? { create: [], errors: [] };
    if (volumes.errors.length > 0)
      throw new DeployError("invalid", "The build names network volumes it cannot use; nothing was activated", volumes.errors, "volumes");
    return volumes.create;
  }

  /** What a release needs of this service now: its secrets set, GPUs this host has. */
  private checkRelease(ref: EnvironmentRef, resources: Record<string, ManifestResource>): void {
    const unset = missingSecrets(this.deps.secrets, ref.userId, ref.app, ref.env, resources);
    if (unset.length > 0) throw new DeployError("invalid", "The release names secrets that are not set; nothing was activated", unset, "secrets");
    const beyond = gpuShortfalls(this.deps.gpus(), resources);
    if (beyond.length > 0) throw new DeployError("invalid", "The release asks for GPUs this host does not have; nothing was activated", beyond, "gpus");
  }

  /**
   * Image endpoints' images must be in the Docker engine that runs them (there is no registry to pull from). A
   * driver that runs no images is not asked: such an endpoint waits, saying why (the scaler), and a cluster that
   * pulls its images (Kubernetes) finds them itself.
   */
  private async checkImages(resources: Record<string, ManifestResource>): Promise<void> {
    const scaler = this.deps.scaler();
    if (!scaler?.runsImages || scaler.pullsImages || !scaler.hasImage) return;
    const missing: string[] = [];
    for (const [name, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const image = endpointImageOf(resource);
      if (image && !(await scaler.hasImage(image)))
        missing.push(
          `endpoint "${name}": image "${image}" is not in the Docker engine; there is no registry to pull from: build it or \`docker load\` it, then deploy again`,
        );
    }
    if (missing.length > 0)
      throw new DeployError("invalid", "The release names images the Docker engine does not hold; nothing was activated", missing, "images");
  }

  private async planFor(ref: EnvironmentRef, environment: EnvironmentRow, build: BuildRow): Promise<ActivationPlan> {
    const current = environment.buildId ? await this.deps.store.build(ref.userId, environment.buildId) : undefined;
    return planActivation(this.endpointsOf(ref.userId, ref.app, ref.env), { ...ref, build, current, artifactPath: build.path }, Date.now());
  }

  /** Steps 3 to 5 above: begin the release; `done` follows it to the end. */
  private async release(
    environment: EnvironmentRow,
    build: BuildRow,
    kind: ReleaseRow["kind"],
    change: Switch,
  ): Promise<{ release: ReleaseRow; done: Promise<ReleaseRow> }> {
    const { release, settled } = await this.deps.releases.begin({
      userId: environment.userId,
      app: environment.app,
      env: environment.name,
      buildId: build.id,
      previousBuildId: environment.buildId,
      kind,
      probe: change.probe.map((row) => ({ row, action: this.deps.endpoints.has(row.id) ? "update" : "create" })),
      commit: (extra) => this.switchOver(environment, build, change, extra),
    });
    const done = settled.then(async (outcome) => {
      if (outcome.state !== "live") throw new ReleaseFailedError(outcome);
      await this.afterSwitch(change.remove);
      return outcome;
    });
    // The caller may not wait (an HTTP activation with wait: false): a failure after the switch is still said.
    // A release that did not switch was said by the release manager already.
    done.catch((err: unknown) => {
      if (!(err instanceof ReleaseFailedError)) this.deps.log(`release ${release.id} of ${environment.app}/${environment.name}: ${errorMessage(err)}`);
    });
    return { release, done };
  }

  /** Step 4: called by the release manager once every probe is up, with the release's record to write alongside. */
  private async switchOver(environment: EnvironmentRow, build: BuildRow, change: Switch, extra: StoreOp[]): Promise<void> {
    for (const row of change.remove) {
      this.deps.endpoints.remove(row.id);
      await this.deps.dropEndpoint(row.id);
    }
    await this.deps.write([
      ...change.write.map((endpoint) => ({ op: "upsertEndpoint", endpoint }) as StoreOp),
      { op: "upsertEnvironment", environment: { ...environment, buildId: build.id, activatedAt: Date.now() } },
      ...extra,
    ]);
    for (const row of change.write) this.deps.endpoints.upsert(row);
  }

  /** Step 5. Management hears of the change before the wait, which may time out after the switch stood. */
  private async afterSwitch(removed: EndpointRow[]): Promise<void> {
    this.deps.scaler()?.reconcile();
    await this.deps.management?.appChanged();
    await this.waitWorkersGone(removed.map((r) => r.id));
  }

  /** Drop endpoints (their jobs, logs) and return once none of their workers runs. */
  private async removeEndpoints(rows: EndpointRow[]): Promise<RemovedEndpoint[]> {
    for (const row of rows) {
      this.deps.endpoints.remove(row.id);
      await this.deps.dropEndpoint(row.id);
    }
    this.deps.scaler()?.reconcile();
    await this.waitWorkersGone(rows.map((r) => r.id));
    return rows.map((r) => ({ name: r.name, id: r.id, env: r.env }));
  }

  private async waitWorkersGone(ids: string[]): Promise<void> {
    const scaler = this.deps.scaler();
    if (!scaler || ids.length === 0) return;
    const gone = await scaler.stopWorkersOf(new Set(ids), this.deps.workersGoneTimeoutMs ?? WORKERS_GONE_TIMEOUT_MS);
    if (!gone)
      throw new DeployError("workers-running", "The endpoints were removed but some of their workers are still running", ["check again with `svc env get`"]);
  }
}

/**
 * Keep a local artifact under the data directory by its sha256: workers started later (scale-up, restarts) get
 * exactly the deployed build even when the caller's file is rebuilt in place.
 */
export async function keepArtifactFile(dataDir: string, source: string): Promise<{ sha256: string; size: number; path: string }> {
  const sha256 = await hashFile(source);
  const dir = join(dataDir, "artifacts");
  const target = join(dir, `${sha256}.tar.gz`);
  if (!existsSync(target)) {
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    const temp = `${target}.${process.pid}.${Date.now()}.tmp`;
    await copyFile(source, temp);
    // A copy has its source's mode: the service's copy is its own.
    await chmod(temp, PRIVATE_FILE_MODE);
    await rename(temp, target);
  }
  return { sha256, size: (await stat(target)).size, path: target };
}

function hashFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}
