// SQLite side of apps, environments, builds and releases (the store's tables the deploy module reads and writes
// through Store), kept out of store/sqlite.ts so that file only gains a migration entry and two delegating lines.

import type Database from "better-sqlite3";
import type { DeployStoreOp, DeployStoreReads, ReleaseRow } from "./deploy-rows.js";
import { rowToApp, rowToBuild, rowToEnvironment } from "./rows.js";

export const DEPLOY_MIGRATION = `
  CREATE TABLE apps (user_id TEXT NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (user_id, name));
  CREATE TABLE environments (
    user_id TEXT NOT NULL, app TEXT NOT NULL, name TEXT NOT NULL, build_id TEXT, created_at INTEGER NOT NULL,
    activated_at INTEGER, PRIMARY KEY (user_id, app, name));
  CREATE TABLE builds (
    id TEXT NOT NULL, user_id TEXT NOT NULL, app TEXT NOT NULL, size INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    manifest TEXT NOT NULL, path TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (user_id, id));`;

/** Releases: each activation of a build and its outcome (the record itself is JSON: it is read whole). */
export const RELEASES_MIGRATION = `
  CREATE TABLE releases (
    user_id TEXT NOT NULL, app TEXT NOT NULL, env TEXT NOT NULL, id TEXT NOT NULL, started_at INTEGER NOT NULL,
    record TEXT NOT NULL, PRIMARY KEY (user_id, app, env, id));
  CREATE INDEX releases_recent ON releases (user_id, app, env, started_at);`;

const DEPLOY_OPS = new Set(["upsertRelease", "upsertApp", "deleteApp", "upsertEnvironment", "deleteEnvironment", "insertBuild"]);

export function isDeployOp(op: { op: string }): op is DeployStoreOp {
  return DEPLOY_OPS.has(op.op);
}

export function prepareDeployStatements(db: Database.Database): { apply(op: DeployStoreOp): void; reads: DeployStoreReads } {
  const upsertApp = db.prepare("INSERT OR IGNORE INTO apps (user_id, name, created_at) VALUES (?, ?, ?)");
  const deleteApp = db.prepare("DELETE FROM apps WHERE user_id = ? AND name = ?");
  const deleteAppEnvironments = db.prepare("DELETE FROM environments WHERE user_id = ? AND app = ?");
  const deleteAppBuilds = db.prepare("DELETE FROM builds WHERE user_id = ? AND app = ?");
  const upsertEnvironment = db.prepare(
    `INSERT INTO environments (user_id, app, name, build_id, created_at, activated_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (user_id, app, name) DO UPDATE SET build_id = excluded.build_id, activated_at = excluded.activated_at`,
  );
  const deleteEnvironment = db.prepare("DELETE FROM environments WHERE user_id = ? AND app = ? AND name = ?");
  const insertBuild = db.prepare(
    "INSERT OR IGNORE INTO builds (id, user_id, app, size, fingerprint, manifest, path, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const upsertRelease = db.prepare(
    `INSERT INTO releases (user_id, app, env, id, started_at, record) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (user_id, app, env, id) DO UPDATE SET record = excluded.record`,
  );
  const deleteAppReleases = db.prepare("DELETE FROM releases WHERE user_id = ? AND app = ?");
  const deleteEnvironmentReleases = db.prepare("DELETE FROM releases WHERE user_id = ? AND app = ? AND env = ?");
  const releases = db.prepare("SELECT record FROM releases WHERE user_id = ? AND app = ? AND env = ? ORDER BY started_at DESC, rowid DESC LIMIT ?");
  const apps = db.prepare("SELECT * FROM apps WHERE user_id = ? ORDER BY name");
  const environments = db.prepare("SELECT * FROM environments WHERE user_id = ? AND app = ? ORDER BY name");
  const build = db.prepare("SELECT * FROM builds WHERE user_id = ? AND id = ?");

  return {
    apply(o) {
      switch (o.op) {
        case "upsertApp":
          upsertApp.run(o.app.userId, o.app.name, o.app.createdAt);
          break;
        case "upsertRelease": {
          const r = o.release;
          upsertRelease.run(r.userId, r.app, r.env, r.id, r.startedAt, JSON.stringify(r));
          break;
        }
        case "deleteApp":
          deleteAppReleases.run(o.userId, o.name);
          deleteAppEnvironments.run(o.userId, o.name);
          deleteAppBuilds.run(o.userId, o.name);
          deleteApp.run(o.userId, o.name);
          break;
        case "upsertEnvironment": {
          const e = o.environment;
          upsertEnvironment.run(e.userId, e.app, e.name, e.buildId, e.createdAt, e.activatedAt);
          break;
        }
        case "deleteEnvironment":
          deleteEnvironmentReleases.run(o.userId, o.app, o.name);
          deleteEnvironment.run(o.userId, o.app, o.name);
          break;
        case "insertBuild": {
          const b = o.build;
          insertBuild.run(b.id, b.userId, b.app, b.size, b.fingerprint, JSON.stringify(b.manifest), b.path, b.createdAt);
          break;
        }
      }
    },
    reads: {
      async apps(userId) {
        return (apps.all(userId) as Array<Record<string, unknown>>).map(rowToApp);
      },
      async environments(userId, app) {
        return (environments.all(userId, app) as Array<Record<string, unknown>>).map(rowToEnvironment);
      },
      async releases(userId, app, env, limit) {
        return (releases.all(userId, app, env, limit) as Array<{ record: string }>).map((r) => JSON.parse(r.record) as ReleaseRow);
      },
      async build(userId, id) {
        const r = build.get(userId, id) as Record<string, unknown> | undefined;
        return r ? rowToBuild(r) : undefined;
      },
    },
  };
}
