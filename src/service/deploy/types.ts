// issue 5: what the service keeps about apps, their environments and uploaded builds. The endpoints an
// environment runs stay in the `endpoints` table; an environment points at the build it runs.

import type { Manifest } from "../../sdk/manifest.js";

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

export type DeployStoreOp =
  | { op: "upsertApp"; app: AppRow }
  | { op: "deleteApp"; userId: string; name: string }
  | { op: "upsertEnvironment"; environment: EnvironmentRow }
  | { op: "deleteEnvironment"; userId: string; app: string; name: string }
  | { op: "insertBuild"; build: BuildRow };

export interface DeployStoreReads {
  apps(userId: string): Promise<AppRow[]>;
  environments(userId: string, app: string): Promise<EnvironmentRow[]>;
  build(userId: string, id: string): Promise<BuildRow | undefined>;
}
