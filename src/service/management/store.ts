// Durable state of the management API: network volumes, templates, REST-created endpoints' settings, and API
// key listing/creation/revocation. Its tables live in the service's SQLite file (created by the numbered
// migration below, listed in src/service/schema/sqlite.ts); this module reads and writes them through its own
// connection (WAL allows several), so the job engine's batched store stays untouched. A server-grade store
// implements `ManagementStore` the same way it implements `Store`.

import { openDatabase } from "../store/driver.js";
import type { Queryable } from "../store/queryable.js";

/** A network volume's storage tiers (the schemas publish them as the VolumeType enum). */
export const VOLUME_TYPES = ["STANDARD", "HIGH_PERFORMANCE"] as const;
export type VolumeType = (typeof VOLUME_TYPES)[number];

/** Appended to SQLITE_MIGRATIONS: network volumes, templates, REST endpoints, key names and expiry. */
export const MANAGEMENT_MIGRATION = `
  CREATE TABLE network_volumes (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL,
    data_center TEXT NOT NULL, type TEXT NOT NULL, created_at INTEGER NOT NULL);
  CREATE INDEX network_volumes_user ON network_volumes (user_id);
  CREATE TABLE templates (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL, image_name TEXT NOT NULL, env TEXT NOT NULL,
    container_disk_gb INTEGER NOT NULL, created_at INTEGER NOT NULL);
  CREATE INDEX templates_user ON templates (user_id);
  CREATE TABLE rest_endpoints (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, spec TEXT NOT NULL);
  ALTER TABLE api_keys ADD COLUMN name TEXT;
  ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;`;

/** Appended to SQLITE_MIGRATIONS: the shared-memory size a template's image is allowed (null: the engine's default). */
export const TEMPLATE_SHM_MIGRATION = `ALTER TABLE templates ADD COLUMN shm_size_mb INTEGER;`;

/**
 * Appended to SQLITE_MIGRATIONS: users' container registry credentials (username and password sealed together,
 * as secrets are), and the one a template's image is pulled with.
 */
export const REGISTRY_AUTH_MIGRATION = `
  CREATE TABLE registry_auths (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL, key_id TEXT NOT NULL,
    created_at INTEGER NOT NULL);
  CREATE UNIQUE INDEX registry_auths_user_name ON registry_auths (user_id, name);
  ALTER TABLE templates ADD COLUMN container_registry_auth_id TEXT;`;

/** Appended to SQLITE_MIGRATIONS after MANAGEMENT_MIGRATION: restart counters of REST endpoints. */
export const MANAGEMENT_MIGRATION_2 = `ALTER TABLE rest_endpoints ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;`;

export interface VolumeRecord {
  id: string;
  userId: string;
  name: string;
  size: number;
  dataCenter: string;
  type: VolumeType;
  createdAt: number;
}

export interface TemplateRecord {
  id: string;
  userId: string;
  name: string;
  imageName: string;
  env: Record<string, string>;
  containerDiskInGb: number;
  /**
   * The size of /dev/shm its image's containers get, in MiB (images of model servers share tensors through it);
   * null: the engine's default (Docker: 64 MiB).
   */
  shmSizeMb?: number | null;
  /** The user's registry credentials its image is pulled with (a RegistryAuthRecord's id); null: none. */
  containerRegistryAuthId?: string | null;
  createdAt: number;
}

/**
 * A user's credentials for container registries: `sealed` holds `{"username", "password"}` as JSON, sealed with
 * the service's secrets key (secrets/box.ts) and bound to the record's user and id.
 */
export interface RegistryAuthRecord {
  id: string;
  userId: string;
  name: string;
  sealed: Buffer;
  keyId: string;
  createdAt: number;
}

/** The settings of an endpoint created through `POST /v1/endpoints`, as the user gave them. */
export interface RestEndpointSpec {
  name: string;
  templateId: string;
  computeType: "GPU" | "CPU";
  gpuTypeIds: string[];
  gpuCount: number;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  env: Record<string, string>;
  networkVolumeId: string | null;
  executionTimeoutMs: number;
  scalerType: "QUEUE_DELAY" | "REQUEST_COUNT";
  scalerValue: number;
  /** "lb": a load-balanced endpoint running the template's prebuilt image. Absent in specs stored before it existed. */
  type?: "queue" | "lb";
  /** Models its workers find in the host's model cache, "org/name@revision" each. Absent in specs stored before it existed: none. */
  models?: string[];
}

export interface KeyRecord {
  id: string;
  userId: string;
  name: string | null;
  scopes: string[];
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
}

/** Writes are committed when they return (or their promise settles: a database server). */
export interface ManagementStore {
  volumes(userId: string): VolumeRecord[];
  volume(id: string): VolumeRecord | undefined;
  /** Every volume (to resolve an app endpoint's `volume` by id or name). */
  allVolumes(): VolumeRecord[];
  putVolume(v: VolumeRecord): void | Promise<void>;
  deleteVolume(id: string): void | Promise<void>;
  templates(userId: string): TemplateRecord[];
  template(id: string): TemplateRecord | undefined;
  putTemplate(t: TemplateRecord): void | Promise<void>;
  deleteTemplate(id: string): void | Promise<void>;
  /** A user's registry auths; without a user, every user's (to seal them again under a new key). */
  registryAuths(userId?: string): RegistryAuthRecord[];
  registryAuth(id: string): RegistryAuthRecord | undefined;
  putRegistryAuth(r: RegistryAuthRecord): void | Promise<void>;
  deleteRegistryAuth(id: string): void | Promise<void>;
  /** `generation` counts the updates that restarted the workers (part of the endpoint's revision). */
  restEndpoints(): Array<{ id: string; userId: string; spec: RestEndpointSpec; generation: number }>;
  putRestEndpoint(id: string, userId: string, spec: RestEndpointSpec, generation: number): void | Promise<void>;
  deleteRestEndpoint(id: string): void | Promise<void>;
  keys(userId: string): KeyRecord[] | Promise<KeyRecord[]>;
  /** The users holding keys that are not revoked (a single-user service checks it holds one). */
  keyUsers?(): string[] | Promise<string[]>;
  key(id: string): KeyRecord | undefined | Promise<KeyRecord | undefined>;
  insertKey(k: KeyRecord & { hash: string }): void | Promise<void>;
  revokeKey(id: string, at: number): void | Promise<void>;
  close(): void;
}

/** Rows of these tables as records (SQLite and PostgreSQL give them the same columns). */
export const volumeOf = (r: Record<string, unknown>): VolumeRecord => ({
  id: r.id as string,
  userId: r.user_id as string,
  name: r.name as string,
  size: r.size as number,
  dataCenter: r.data_center as string,
  type: r.type as VolumeType,
  createdAt: r.created_at as number,
});

export const templateOf = (r: Record<string, unknown>): TemplateRecord => ({
  id: r.id as string,
  userId: r.user_id as string,
  name: r.name as string,
  imageName: r.image_name as string,
  env: JSON.parse(r.env as string) as Record<string, string>,
  containerDiskInGb: r.container_disk_gb as number,
  shmSizeMb: (r.shm_size_mb as number | null | undefined) ?? null,
  containerRegistryAuthId: (r.container_registry_auth_id as string | null | undefined) ?? null,
  createdAt: r.created_at as number,
});

export const registryAuthOf = (r: Record<string, unknown>): RegistryAuthRecord => ({
  id: r.id as string,
  userId: r.user_id as string,
  name: r.name as string,
  sealed: Buffer.from(r.sealed as Uint8Array),
  keyId: r.key_id as string,
  createdAt: Number(r.created_at),
});

export const keyOf = (r: Record<string, unknown>): KeyRecord => ({
  id: r.id as string,
  userId: r.user_id as string,
  name: (r.name as string | null) ?? null,
  scopes: JSON.parse(r.scopes as string) as string[],
  createdAt: r.created_at as number,
  expiresAt: (r.expires_at as number | null) ?? null,
  revokedAt: (r.revoked_at as number | null) ?? null,
});

export const restEndpointOf = (r: Record<string, unknown>) => ({
  id: r.id as string,
  userId: r.user_id as string,
  spec: JSON.parse(r.spec as string) as RestEndpointSpec,
  generation: r.generation as number,
});

export function openSqliteManagementStore(file: string): ManagementStore {
  const db = openDatabase(file);
  db.pragma("busy_timeout = 5000");
  const q = {
    volumes: db.prepare("SELECT * FROM network_volumes WHERE user_id = ? ORDER BY created_at, id"),
    allVolumes: db.prepare("SELECT * FROM network_volumes ORDER BY created_at, id"),
    volume: db.prepare("SELECT * FROM network_volumes WHERE id = ?"),
    putVolume: db.prepare(
      `INSERT INTO network_volumes (id, user_id, name, size, data_center, type, created_at)
       VALUES (@id, @userId, @name, @size, @dataCenter, @type, @createdAt)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, size = excluded.size`,
    ),
    deleteVolume: db.prepare("DELETE FROM network_volumes WHERE id = ?"),
    templates: db.prepare("SELECT * FROM templates WHERE user_id = ? ORDER BY created_at, id"),
    template: db.prepare("SELECT * FROM templates WHERE id = ?"),
    putTemplate: db.prepare(
      `INSERT OR REPLACE INTO templates (id, user_id, name, image_name, env, container_disk_gb, shm_size_mb, container_registry_auth_id, created_at)
       VALUES (@id, @userId, @name, @imageName, @env, @containerDiskInGb, @shmSizeMb, @containerRegistryAuthId, @createdAt)`,
    ),
    deleteTemplate: db.prepare("DELETE FROM templates WHERE id = ?"),
    registryAuths: db.prepare("SELECT * FROM registry_auths WHERE user_id = ? ORDER BY created_at, id"),
    allRegistryAuths: db.prepare("SELECT * FROM registry_auths ORDER BY created_at, id"),
    registryAuth: db.prepare("SELECT * FROM registry_auths WHERE id = ?"),
    putRegistryAuth: db.prepare(
      `INSERT OR REPLACE INTO registry_auths (id, user_id, name, sealed, key_id, created_at) VALUES (@id, @userId, @name, @sealed, @keyId, @createdAt)`,
    ),
    deleteRegistryAuth: db.prepare("DELETE FROM registry_auths WHERE id = ?"),
    restEndpoints: db.prepare("SELECT * FROM rest_endpoints"),
    putRestEndpoint: db.prepare("INSERT OR REPLACE INTO rest_endpoints (id, user_id, spec, generation) VALUES (?, ?, ?, ?)"),
    deleteRestEndpoint: db.prepare("DELETE FROM rest_endpoints WHERE id = ?"),
    keys: db.prepare("SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at, id"),
    keyUsers: db.prepare("SELECT DISTINCT user_id FROM api_keys WHERE revoked_at IS NULL ORDER BY user_id"),
    key: db.prepare("SELECT * FROM api_keys WHERE id = ?"),
    insertKey: db.prepare("INSERT INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at, name, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
    revokeKey: db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
  };
  return {
    volumes: (userId) => (q.volumes.all(userId) as Record<string, unknown>[]).map(volumeOf),
    allVolumes: () => (q.allVolumes.all() as Record<string, unknown>[]).map(volumeOf),
    volume: (id) => {
      const r = q.volume.get(id) as Record<string, unknown> | undefined;
      return r && volumeOf(r);
    },
    putVolume: (v) => void q.putVolume.run(v),
    deleteVolume: (id) => void q.deleteVolume.run(id),
    templates: (userId) => (q.templates.all(userId) as Record<string, unknown>[]).map(templateOf),
    template: (id) => {
      const r = q.template.get(id) as Record<string, unknown> | undefined;
      return r && templateOf(r);
    },
    putTemplate: (t) =>
      void q.putTemplate.run({ ...t, env: JSON.stringify(t.env), shmSizeMb: t.shmSizeMb ?? null, containerRegistryAuthId: t.containerRegistryAuthId ?? null }),
    deleteTemplate: (id) => void q.deleteTemplate.run(id),
    registryAuths: (userId) =>
      ((userId === undefined ? q.allRegistryAuths.all() : q.registryAuths.all(userId)) as Record<string, unknown>[]).map(registryAuthOf),
    registryAuth: (id) => {
      const r = q.registryAuth.get(id) as Record<string, unknown> | undefined;
      return r && registryAuthOf(r);
    },
    putRegistryAuth: (r) => void q.putRegistryAuth.run(r),
    deleteRegistryAuth: (id) => void q.deleteRegistryAuth.run(id),
    restEndpoints: () => (q.restEndpoints.all() as Record<string, unknown>[]).map(restEndpointOf),
    putRestEndpoint: (id, userId, spec, generation) => void q.putRestEndpoint.run(id, userId, JSON.stringify(spec), generation),
    deleteRestEndpoint: (id) => void q.deleteRestEndpoint.run(id),
    keys: (userId) => (q.keys.all(userId) as Record<string, unknown>[]).map(keyOf),
    keyUsers: () => (q.keyUsers.all() as Array<{ user_id: string }>).map((r) => r.user_id),
    key: (id) => {
      const r = q.key.get(id) as Record<string, unknown> | undefined;
      return r && keyOf(r);
    },
    insertKey: (k) => void q.insertKey.run(k.id, k.hash, k.userId, JSON.stringify(k.scopes), k.createdAt, k.revokedAt, k.name, k.expiresAt),
    revokeKey: (id, at) => void q.revokeKey.run(at, id),
    close: () => {
      if (db.open) db.close();
    },
  };
}

// The management records (network volumes, templates, REST endpoints, API keys) on PostgreSQL. These are small
// per-user tables read on most requests and written rarely, so each replica keeps all of their rows in memory and
// reads there, synchronously, as the SQLite stores do. A write is committed to
// the database before the memory changes (and before the request is answered); `reload()` reads the tables
// again, which is how a replica sees what another one wrote (cluster/config-sync.ts). API keys are the
// exception: read from the database on each call, since the job engine's batches write that table too.

const byCreation = <T extends { createdAt: number; id: string }>(a: T, b: T) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export type ReloadingManagementStore = ManagementStore & { reload(): Promise<void> };

export async function openPostgresManagementStore(pool: Queryable): Promise<ReloadingManagementStore> {
  let volumes = new Map<string, VolumeRecord>();
  let templates = new Map<string, TemplateRecord>();
  let rest = new Map<string, { id: string; userId: string; spec: RestEndpointSpec; generation: number }>();
  let auths = new Map<string, RegistryAuthRecord>();
  // A reload whose reads began before a write of this replica's may miss it: such a reload keeps the memory.
  let writes = 0;
  /** Commit, then change the memory; counted on both sides so that a reload overlapping it keeps the memory. */
  const write = async (text: string, values: unknown[], apply: () => void) => {
    writes++;
    await pool.query(text, values);
    writes++;
    apply();
  };

  const reload = async () => {
    const before = writes;
    const [v, t, r, a] = await Promise.all([
      pool.query("SELECT * FROM network_volumes"),
      pool.query("SELECT * FROM templates"),
      pool.query("SELECT * FROM rest_endpoints"),
      pool.query("SELECT * FROM registry_auths"),
    ]);
    if (writes !== before) return;
    volumes = new Map(v.rows.map((x) => [x.id, volumeOf(x)]));
    templates = new Map(t.rows.map((x) => [x.id, templateOf(x)]));
    rest = new Map(r.rows.map((x) => [x.id, restEndpointOf(x)]));
    auths = new Map(a.rows.map((x) => [x.id, registryAuthOf(x)]));
  };
  await reload();

  return {
    reload,
    volumes: (userId) => [...volumes.values()].filter((v) => v.userId === userId).sort(byCreation),
    allVolumes: () => [...volumes.values()].sort(byCreation),
    volume: (id) => volumes.get(id),
    putVolume: (v) =>
      write(
        `INSERT INTO network_volumes (id, user_id, name, size, data_center, type, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, size = excluded.size`,
        [v.id, v.userId, v.name, v.size, v.dataCenter, v.type, v.createdAt],
        () => {
          const existing = volumes.get(v.id);
          volumes.set(v.id, existing ? { ...existing, name: v.name, size: v.size } : v);
        },
      ),
    deleteVolume: (id) => write("DELETE FROM network_volumes WHERE id = $1", [id], () => volumes.delete(id)),
    templates: (userId) => [...templates.values()].filter((t) => t.userId === userId).sort(byCreation),
    template: (id) => templates.get(id),
    putTemplate: (t) =>
      write(
        `INSERT INTO templates (id, user_id, name, image_name, env, container_disk_gb, shm_size_mb, container_registry_auth_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, name = excluded.name, image_name = excluded.image_name,
           env = excluded.env, container_disk_gb = excluded.container_disk_gb, shm_size_mb = excluded.shm_size_mb,
           container_registry_auth_id = excluded.container_registry_auth_id, created_at = excluded.created_at`,
        [t.id, t.userId, t.name, t.imageName, JSON.stringify(t.env), t.containerDiskInGb, t.shmSizeMb ?? null, t.containerRegistryAuthId ?? null, t.createdAt],
        () => templates.set(t.id, t),
      ),
    deleteTemplate: (id) => write("DELETE FROM templates WHERE id = $1", [id], () => templates.delete(id)),
    registryAuths: (userId) => [...auths.values()].filter((a) => userId === undefined || a.userId === userId).sort(byCreation),
    registryAuth: (id) => auths.get(id),
    putRegistryAuth: (a) =>
      write(
        `INSERT INTO registry_auths (id, user_id, name, sealed, key_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, sealed = excluded.sealed, key_id = excluded.key_id`,
        [a.id, a.userId, a.name, a.sealed, a.keyId, a.createdAt],
        () => auths.set(a.id, a),
      ),
    deleteRegistryAuth: (id) => write("DELETE FROM registry_auths WHERE id = $1", [id], () => auths.delete(id)),
    restEndpoints: () => [...rest.values()],
    putRestEndpoint: (id, userId, spec, generation) =>
      write(
        `INSERT INTO rest_endpoints (id, user_id, spec, generation) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, spec = excluded.spec, generation = excluded.generation`,
        [id, userId, JSON.stringify(spec), generation],
        () => rest.set(id, { id, userId, spec, generation }),
      ),
    deleteRestEndpoint: (id) => write("DELETE FROM rest_endpoints WHERE id = $1", [id], () => rest.delete(id)),
    // Keys are read from the database on every call: the job engine's batches write the same table (the
    // operator's bootstrap keys, workers' keys and their revocation), so a copy here would go stale.
    async keys(userId) {
      const { rows } = await pool.query("SELECT * FROM api_keys WHERE user_id = $1 ORDER BY created_at, id", [userId]);
      return rows.map(keyOf);
    },
    async keyUsers() {
      const { rows } = await pool.query("SELECT DISTINCT user_id FROM api_keys WHERE revoked_at IS NULL ORDER BY user_id");
      return rows.map((r) => r.user_id as string);
    },
    async key(id) {
      const { rows } = await pool.query("SELECT * FROM api_keys WHERE id = $1", [id]);
      return rows[0] ? keyOf(rows[0]) : undefined;
    },
    async insertKey(k) {
      await pool.query("INSERT INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at, name, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", [
        k.id,
        k.hash,
        k.userId,
        JSON.stringify(k.scopes),
        k.createdAt,
        k.revokedAt,
        k.name,
        k.expiresAt,
      ]);
    },
    async revokeKey(id, at) {
      await pool.query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [at, id]);
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
