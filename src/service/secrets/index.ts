// Secrets of users, given to their endpoints' workers as environment variables. Values are sealed at rest
// (box.ts) and opened only to start a worker; they never reach artifacts, manifests, logs, job records or any
// answer of the API. A secret is the user's, for every app, or for one app, or for one app's environment; an
// endpoint gets the most specific one of each name it lists (`secrets: [...]` in its configuration).
//
// The registry keeps every row in memory (secrets are few and small), so the scaler can ask synchronously what a
// worker gets and whether that changed since its workers started (`digest`): a changed value rolls them.

import { createHash } from "node:crypto";
import { SecretBox } from "./box.js";
import type { SecretRow, SecretStore } from "./store.js";

export interface SecretScope {
  app?: string;
  env?: string;
}

/** A secret as the API shows it: never its value. */
export interface SecretInfo {
  name: string;
  app: string | null;
  env: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface SecretsFor {
  /** Name -> value, for the names that resolve. */
  env: Record<string, string>;
  /** Names listed but not set (or not readable with the configured keys). */
  missing: string[];
  /** Changes exactly when a resolved value changes (or one appears or goes): the workers' secret revision. */
  digest: string;
}

const binding = (r: { userId: string; app: string; env: string; name: string }) => `${r.userId}\u0000${r.app}\u0000${r.env}\u0000${r.name}`;

export function infoOf(r: SecretRow): SecretInfo {
  return { name: r.name, app: r.app || null, env: r.env || null, createdAt: r.createdAt, updatedAt: r.updatedAt };
}

export class Secrets {
  private rows = new Map<string, SecretRow>();

  constructor(
    private readonly store: SecretStore,
    private readonly box: SecretBox,
    private readonly log: (message: string) => void = () => undefined,
  ) {
    this.refresh();
  }

  /** Take the store's rows again (another replica may have set or deleted some). */
  refresh(): void {
    const rows = new Map<string, SecretRow>();
    for (const r of this.store.all()) rows.set(binding(r), r);
    this.rows = rows;
  }

  /** Seal again, under the current key, every value sealed with a previous one. How many were; unreadable ones are named in the log. */
  async rotate(): Promise<number> {
    let resealed = 0;
    for (const r of this.rows.values()) {
      if (r.keyId === this.box.currentId) continue;
      const value = this.box.open(r.sealed, r.keyId, binding(r));
      if (value === undefined) {
        this.log(
          `secret ${r.name} of user ${r.userId} cannot be opened: the key it was sealed with (id ${r.keyId}) is not configured; set it again or configure that key as a previous secrets key`,
        );
        continue;
      }
      const { sealed, keyId } = this.box.seal(value, binding(r));
      const next = { ...r, sealed, keyId };
      await this.store.put(next);
      this.rows.set(binding(r), next);
      resealed++;
    }
    return resealed;
  }

  list(userId: string): SecretInfo[] {
    return [...this.rows.values()].filter((r) => r.userId === userId).map(infoOf);
  }

  /** Set (create or replace) a value; its record and whether it was new. */
  async set(userId: string, name: string, value: string, scope: SecretScope, now = Date.now()): Promise<{ info: SecretInfo; created: boolean }> {
    const key = { userId, app: scope.app ?? "", env: scope.env ?? "", name };
    const existing = this.rows.get(binding(key));
    const { sealed, keyId } = this.box.seal(value, binding(key));
    const row: SecretRow = { ...key, sealed, keyId, createdAt: existing?.createdAt ?? now, updatedAt: now };
    await this.store.put(row);
    this.rows.set(binding(key), row);
    return { info: infoOf(row), created: !existing };
  }

  async delete(userId: string, name: string, scope: SecretScope): Promise<boolean> {
    const key = { userId, app: scope.app ?? "", env: scope.env ?? "", name };
    if (!(await this.store.delete(key.userId, key.app, key.env, key.name))) return false;
    this.rows.delete(binding(key));
    return true;
  }

  /** The most specific row of `name` for an endpoint of `app`/`env`: the environment's, the app's, the user's. */
  private pick(userId: string, app: string, env: string, name: string): SecretRow | undefined {
    return (
      this.rows.get(binding({ userId, app, env, name })) ??
      this.rows.get(binding({ userId, app, env: "", name })) ??
      this.rows.get(binding({ userId, app: "", env: "", name }))
    );
  }

  /** What the workers of an endpoint (user, app, environment) listing `names` get. */
  resolve(userId: string, app: string, env: string, names: readonly string[]): SecretsFor {
    const out: SecretsFor = { env: {}, missing: [], digest: "" };
    const hash = createHash("sha256");
    for (const name of [...names].sort()) {
      const row = this.pick(userId, app, env, name);
      const value = row && this.box.open(row.sealed, row.keyId, binding(row));
      if (value === undefined) {
        out.missing.push(name);
        hash.update(`${name}\u0000-\u0000`);
        continue;
      }
      out.env[name] = value;
      // The sealed bytes differ on every set (a fresh IV), even to the same value within one millisecond.
      hash.update(`${name}\u0000${row!.app}\u0000${row!.env}\u0000`).update(row!.sealed);
    }
    out.digest = names.length === 0 ? "" : hash.digest("hex").slice(0, 16);
    return out;
  }

  close(): void {
    this.store.close();
  }
}
