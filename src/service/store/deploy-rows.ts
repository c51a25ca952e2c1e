// What the service keeps about apps, their environments and uploaded builds. The endpoints an
// environment runs stay in the `endpoints` table; an environment points at the build it runs.

import type { Manifest } from "svc/internal";

export interface AppRow {
  userId: string;
  name: string;
  createdAt: number;
}

export interface EnvironmentRow {
  userId: string;
  app: string;
  name: string;
  /** The build this environment runs (its sha256), null before the first activation. */
  buildId: string | null;
  createdAt: number;
  activatedAt: number | null;
}

export interface BuildRow {
  /** sha256 of the artifact: the same bytes are one build. */
  id: string;
  userId: string;
  app: string;
  size: number;
  /** Source fingerprint from the manifest. */
  fingerprint: string;
  manifest: Manifest;
  /** Where the service keeps the artifact. */
  path: string;
  createdAt: number;
}

/**
 * What became of a release: starting (new workers coming up), live, failed (the previous build kept), superseded
 * (a newer release began before it settled). Answers also say `replaced`: it went live, and a newer release of the
 * environment has since (releases/state.ts oneLive; records keep `live`).
 */
export type ReleaseState = "starting" | "live" | "failed" | "superseded" | "replaced";

export interface ReleaseEndpoint {
  name: string;
  id: string;
  action: "create" | "update";
  /** starting: probe workers coming up; ready: one loaded its handler (LB: /ping 200); failed: out of attempts. */
  state: "starting" | "ready" | "failed";
  /** Probe workers started so far, and how many of them failed to start. */
  attempts: number;
  failures: number;
  /** The last start failure: the worker's own error (first lines of its stack). */
  error: string | null;
  /**
   * Why its new worker has not started yet, while it is starting: "waiting for a GPU (HOPPER_141: 2 of 2 in use)".
   * Read when the release is answered (never stored).
   */
  waiting?: string;
}

/** One activation of a build in an environment, and its outcome. */
export interface ReleaseRow {
  id: string;
  userId: string;
  app: string;
  env: string;
  buildId: string;
  /** The build the environment ran when this release began (what it keeps on failure). */
  previousBuildId: string | null;
  kind: "deploy" | "rollback";
  state: ReleaseState;
  startedAt: number;
  finishedAt: number | null;
  /** The endpoints whose new workers had to prove they start (created or changed ones). */
  endpoints: ReleaseEndpoint[];
  /** Why it failed: which endpoint, and the worker's error. */
  error: { endpoint: string; message: string } | null;
}

export type DeployStoreOp =
  | { op: "upsertRelease"; release: ReleaseRow }
  | { op: "upsertApp"; app: AppRow }
  | { op: "deleteApp"; userId: string; name: string }
  | { op: "upsertEnvironment"; environment: EnvironmentRow }
  | { op: "deleteEnvironment"; userId: string; app: string; name: string }
  | { op: "insertBuild"; build: BuildRow };

export interface DeployStoreReads {
  apps(userId: string): Promise<AppRow[]>;
  environments(userId: string, app: string): Promise<EnvironmentRow[]>;
  build(userId: string, id: string): Promise<BuildRow | undefined>;
  /** An environment's releases, newest first. */
  releases(userId: string, app: string, env: string, limit: number): Promise<ReleaseRow[]>;
}
