// A job's `s3Config`, as its worker gets it: the submission names one of its endpoint owner's network volumes
// (`bucketName`, checked at submission: jobs/validate.ts), and the worker that takes the job gets, in the job,
// `s3Config` {accessId, accessSecret, bucketName, endpointUrl} for a key of its own on that volume. One key per
// (worker, volume), minted on the first take that needs it and revoked when the worker ends, as the worker's
// BUCKET_* key is (worker-bucket.ts); the caller's own credentials never reach the worker. The provider's worker
// SDK hands such an `s3Config` to its upload helper as `bucket_creds`. docs/volumes.md, "A job's s3Config".

import type { JobS3Config } from "svc/internal";
import type { VolumeKeyRecord } from "./key-store.js";
import { keyBinding, newSecretAccessKey } from "./keys.js";
import { workerBucketKeyId, type WorkerBucketDeps } from "./worker-bucket.js";

const NAME_PREFIX = "worker ";

/**
 * The access key id of a worker's key for the jobs naming `volumeId`: derived from both (the worker's own BUCKET_*
 * key is derived from the worker alone), so that a service restarted meanwhile finds it again. Pure.
 */
export function jobBucketKeyId(workerId: string, volumeId: string): string {
  return workerBucketKeyId(`${workerId}/${volumeId}`);
}

/** Its name: the worker and volume first (the presigned-read rule reads the worker from it), then the endpoint. Pure. */
export function jobBucketKeyName(workerId: string, volumeId: string, endpointName: string): string {
  return `${NAME_PREFIX}${workerId}/${volumeId} of ${endpointName} (jobs' s3Config)`;
}

/** Whether a key is one of a worker's job keys. Pure. */
export function isJobBucketKeyOf(k: Pick<VolumeKeyRecord, "name">, workerId: string): boolean {
  return k.name?.startsWith(`${NAME_PREFIX}${workerId}/`) === true;
}

export class JobBuckets {
  /** The credentials handed out, by worker then volume (one mint even when takes race). */
  private readonly minted = new Map<string, Map<string, Promise<JobS3Config | undefined>>>();

  constructor(private readonly deps: WorkerBucketDeps & { log?: (line: string) => void }) {}

  /**
   * The `s3Config` of each job that names a bucket, for the worker taking them (absent for the others, and for a
   * job whose key could not be opened: said in the service's log).
   */
  async forJobs(
    w: { workerId: string; userId: string; endpointName: string },
    jobs: ReadonlyArray<{ id: string; s3Bucket?: string | null }>,
  ): Promise<Map<string, JobS3Config>> {
    const configs = new Map<string, JobS3Config>();
    for (const job of jobs) {
      if (!job.s3Bucket) continue;
      const config = await this.credentials(w, job.s3Bucket);
      if (config) configs.set(job.id, config);
    }
    return configs;
  }

  /** Revoke every job key of the worker (those minted by an earlier run of the service too). */
  async revoke(workerId: string, userId: string): Promise<void> {
    this.minted.delete(workerId);
    const now = Date.now();
    for (const k of await this.deps.keys.keys(userId)) if (k.revokedAt === null && isJobBucketKeyOf(k, workerId)) await this.deps.keys.revoke(k.id, now);
  }

  private credentials(w: { workerId: string; userId: string; endpointName: string }, volumeId: string): Promise<JobS3Config | undefined> {
    let byVolume = this.minted.get(w.workerId);
    if (!byVolume) this.minted.set(w.workerId, (byVolume = new Map()));
    let config = byVolume.get(volumeId);
    if (!config) {
      config = this.mintOrOpen(w, volumeId);
      // A failed mint is tried again by the next take.
      config.catch(() => byVolume.delete(volumeId));
      byVolume.set(volumeId, config);
    }
    return config;
  }

  private async mintOrOpen(w: { workerId: string; userId: string; endpointName: string }, volumeId: string): Promise<JobS3Config | undefined> {
    const id = jobBucketKeyId(w.workerId, volumeId);
    const config = (secret: string): JobS3Config => ({
      accessId: id,
      accessSecret: secret,
      bucketName: volumeId,
      endpointUrl: this.deps.s3Endpoint.replace(/\/+$/, ""),
    });
    const existing = await this.deps.keys.key(id);
    if (existing) {
      // Minted for this worker before the service restarted: the same key, opened again.
      const secret = existing.revokedAt === null ? this.deps.box.open(existing.sealed, existing.keyId, keyBinding(existing)) : undefined;
      if (secret === undefined) this.deps.log?.(`the job key ${id} of worker ${w.workerId} is revoked or cannot be opened: its jobs get no s3Config`);
      return secret === undefined ? undefined : config(secret);
    }
    const secret = newSecretAccessKey();
    const base = {
      id,
      userId: w.userId,
      name: jobBucketKeyName(w.workerId, volumeId, w.endpointName),
      readOnly: false,
      volumeIds: [volumeId],
      createdAt: Date.now(),
      revokedAt: null,
    };
    const { sealed, keyId } = this.deps.box.seal(secret, keyBinding(base));
    await this.deps.keys.insert({ ...base, sealed, keyId });
    return config(secret);
  }
}
