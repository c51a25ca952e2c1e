// The management records (network volumes, templates, REST endpoints, API keys) and sealed secrets on
// PostgreSQL. These are small per-user tables read on most requests and written rarely, so each replica keeps
// all of their rows in memory and reads there, synchronously, as the SQLite stores do. A write is committed to
// the database before the memory changes (and before the request is answered); `reload()` reads the tables
// again, which is how a replica sees what another one wrote (cluster/config-sync.ts). API keys are the
// exception: read from the database on each call, since the job engine's batches write that table too.

import type { Queryable } from "./index.js";
import { keyOf, restEndpointOf, templateOf, volumeOf, type ManagementStore, type RestEndpointSpec, type TemplateRecord, type VolumeRecord } from "../../management/store.js";
import { secretRowOf, type SecretRow, type SecretStore } from "../../secrets/store.js";

const byCreation = <T extends { createdAt: number; id: string }>(a: T, b: T) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export type ReloadingManagementStore = ManagementStore & { reload(): Promise<void> };

export async function openPostgresManagementStore(pool: Queryable): Promise<ReloadingManagementStore> {
  let volumes = new Map<string, VolumeRecord>();
  let templates = new Map<string, TemplateRecord>();
  let rest = new Map<string, { id: string; userId: string; spec: RestEndpointSpec; generation: number }>();
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
    const [v, t, r] = await Promise.all([
      pool.query("SELECT * FROM network_volumes"),
      pool.query("SELECT * FROM templates"),
      pool.query("SELECT * FROM rest_endpoints"),
    ]);
    if (writes !== before) return;
    volumes = new Map(v.rows.map((x) => [x.id, volumeOf(x)]));
    templates = new Map(t.rows.map((x) => [x.id, templateOf(x)]));
    rest = new Map(r.rows.map((x) => [x.id, restEndpointOf(x)]));
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
        `INSERT INTO templates (id, user_id, name, image_name, env, container_disk_gb, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, name = excluded.name, image_name = excluded.image_name,
           env = excluded.env, container_disk_gb = excluded.container_disk_gb, created_at = excluded.created_at`,
        [t.id, t.userId, t.name, t.imageName, JSON.stringify(t.env), t.containerDiskInGb, t.createdAt],
        () => templates.set(t.id, t),
      ),
    deleteTemplate: (id) => write("DELETE FROM templates WHERE id = $1", [id], () => templates.delete(id)),
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
      await pool.query(
        "INSERT INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at, name, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        [k.id, k.hash, k.userId, JSON.stringify(k.scopes), k.createdAt, k.revokedAt, k.name, k.expiresAt],
      );
    },
    async revokeKey(id, at) {
      await pool.query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [at, id]);
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}

export type ReloadingSecretStore = SecretStore & { reload(): Promise<void> };

export async function openPostgresSecretStore(pool: Queryable): Promise<ReloadingSecretStore> {
  let rows: SecretRow[] = [];
  let writes = 0;
  const same = (a: SecretRow, userId: string, app: string, env: string, name: string) => a.userId === userId && a.app === app && a.env === env && a.name === name;
  const reload = async () => {
    const before = writes;
    const result = await pool.query("SELECT * FROM secrets");
    // Reads that began before a write of this replica's may miss it: keep the memory until the next reload.
    if (writes !== before) return;
    rows = result.rows.map(secretRowOf);
  };
  await reload();
  return {
    reload,
    all: () => rows,
    async put(row) {
      await pool.query(
        `INSERT INTO secrets (user_id, app, env, name, sealed, key_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (user_id, app, env, name) DO UPDATE SET sealed = excluded.sealed, key_id = excluded.key_id, updated_at = excluded.updated_at`,
        [row.userId, row.app, row.env, row.name, row.sealed, row.keyId, row.createdAt, row.updatedAt],
      );
      writes++;
      rows = [...rows.filter((r) => !same(r, row.userId, row.app, row.env, row.name)), row];
    },
    async delete(userId, app, env, name) {
      const { rowCount } = await pool.query("DELETE FROM secrets WHERE user_id = $1 AND app = $2 AND env = $3 AND name = $4", [userId, app, env, name]);
      writes++;
      rows = rows.filter((r) => !same(r, userId, app, env, name));
      return rowCount === 1;
    },
    close() {
      // The pool belongs to the main store, which closes it.
    },
  };
}
