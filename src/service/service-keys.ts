// The service's key policy: operator keys given at start, API keys minted for the management API (scopes checked),
// and each worker's own keys (its token, its API key, its S3 key on its endpoint's volume), revoked when it ends.

import type { WorkerBucket } from "../drivers/types.js";
import { UserError } from "../errors.js";
import { DEFAULT_USER, KeyRing, hashKey, newId, newKey } from "./keys/auth.js";
import { JobEngine } from "./engine/index.js";
import { mintWorkerBucket, revokeWorkerBucket, type WorkerBucketDeps } from "./volumes/worker-bucket.js";
import { JobBuckets } from "./volumes/job-bucket.js";
import type { EndpointRow, StoreOp } from "./store/types.js";

/** How long a key's answer is trusted on replicas sharing a database before it is looked up again. */
export const KEY_RECHECK_MS = 500;
/** The scopes an API key may be given. */
const SCOPE_PATTERN = /^(admin|metrics|jobs:\*|jobs:[a-z0-9]+|worker:[a-z0-9]+)$/;
/** The operator's keys (SVC_API_KEY): admin keys of the default user, under ids derived from them (so a restart finds them again). */
export async function seedOperatorKeys(engine: JobEngine, apiKeys: readonly string[]): Promise<void> {
  if (apiKeys.length === 0) return;
  const now = Date.now();
  await engine.write(
    apiKeys.map((key) => {
      const hash = hashKey(key);
      return {
        op: "insertKey",
        key: { id: `k${hash.slice(0, 15)}`, hash, userId: DEFAULT_USER, scopes: ["admin"], createdAt: now, revokedAt: null },
      } as StoreOp;
    }),
  );
}
/** Service.mintKey: a new key with these scopes (the tests' and `svc dev`'s way to keys without HTTP). */
export function keyMinter(engine: JobEngine, keyring: KeyRing) {
  return async (opts: { scopes: string[]; userId?: string }): Promise<{ id: string; key: string }> => {
    const bad = opts.scopes.filter((s) => !SCOPE_PATTERN.test(s));
    if (opts.scopes.length === 0 || bad.length > 0) {
      throw new UserError("Invalid key scopes", {
        problems: bad.map((s) => `unknown scope "${s}"`),
        hint: "Scopes: admin, jobs:*, jobs:<endpointId>, worker:<endpointId>.",
      });
    }
    const worker = opts.scopes.some((s) => s.startsWith("worker:"));
    const id = newId(8);
    const key = newKey(worker ? "svcw" : "svc");
    await engine.write([
      { op: "insertKey", key: { id, hash: hashKey(key), userId: opts.userId ?? DEFAULT_USER, scopes: opts.scopes, createdAt: Date.now(), revokedAt: null } },
    ]);
    keyring.forget();
    return { id, key };
  };
}
/**
 * The keys a started worker gets, and their revocation when it ends: its worker token (its endpoint's protocol),
 * a jobs key of its owner (for calls to other endpoints), and an S3 key on its endpoint's network volume when it
 * has one (volumes/worker-bucket.ts). Kept under the worker's id, so that they can be revoked when the worker
 * ends, even one adopted after a restart.
 */
export function workerKeyMinter(
  engine: JobEngine,
  keyring: KeyRing,
  volumes: {
    bucket: WorkerBucketDeps;
    jobBuckets: Pick<JobBuckets, "revoke">;
    volumeOf(endpoint: EndpointRow): { id: string } | undefined;
    /** The owner of an endpoint (whose keys a worker's job keys are). */
    userOf(endpointId: string): string | undefined;
  },
) {
  const minted = new Map<string, string[]>();
  return {
    async mint(endpoint: EndpointRow, workerId: string): Promise<{ workerToken: string; apiKey: string; bucket?: WorkerBucket }> {
      const volume = volumes.volumeOf(endpoint);
      const token = newKey("svcw");
      const apiKey = newKey("svc");
      const apiKeyId = `${workerId}-api`;
      const now = Date.now();
      await engine.write([
        {
          op: "insertKey",
          key: { id: workerId, hash: hashKey(token), userId: endpoint.userId, scopes: [`worker:${endpoint.id}`], createdAt: now, revokedAt: null },
        },
        { op: "insertKey", key: { id: apiKeyId, hash: hashKey(apiKey), userId: endpoint.userId, scopes: ["jobs:*"], createdAt: now, revokedAt: null } },
      ]);
      minted.set(workerId, [workerId, apiKeyId]);
      keyring.forget();
      const bucket = volume
        ? await mintWorkerBucket(volumes.bucket, { userId: endpoint.userId, workerId, endpointName: endpoint.name, volumeId: volume.id })
        : undefined;
      return { workerToken: token, apiKey, ...(bucket ? { bucket } : {}) };
    },
    async revoke(workerId: string, endpointId: string): Promise<void> {
      // A worker adopted after a restart has its keys under the same ids, minted by the earlier run.
      const ids = minted.get(workerId) ?? [workerId, `${workerId}-api`];
      minted.delete(workerId);
      await engine.write(ids.map((id) => ({ op: "deleteKey", id }) as StoreOp));
      keyring.forget();
      await revokeWorkerBucket(volumes.bucket, workerId);
      const userId = volumes.userOf(endpointId);
      if (userId) await volumes.jobBuckets.revoke(workerId, userId);
    },
  };
}
