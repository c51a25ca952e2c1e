// A worker's own S3 key on its endpoint's network volume: minted when the worker starts, revoked when it ends,
// and handed to it as the BUCKET_* variables the provider SDK's upload helper reads (drivers/env.ts). The key
// reaches that one volume only (read and write), as a key made with `svc volume keys create --volume` does.
// Once revoked, it still serves the presigned GET URLs it signed while the worker ran (until they expire): those
// are the links jobs hand back, and the worker is often gone before anyone follows them.
// docs/volumes.md, "Uploads from workers".

import { createHash } from "node:crypto";
import type { WorkerBucket } from "../../drivers/types.js";
import type { SecretBox } from "../secrets/box.js";
import type { VolumeKeyRecord, VolumeKeyStore } from "./key-store.js";
import { keyBinding, newSecretAccessKey } from "./keys.js";
import type { SignatureClaim } from "./sigv4.js";

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/**
 * The access key id of a worker's key: derived from the worker's id (20 characters, shaped like AWS's), so that
 * the key of a worker adopted after a restart is found and revoked too. Pure.
 */
export function workerBucketKeyId(workerId: string): string {
  const digest = createHash("sha256").update(`worker-bucket\u0000${workerId}`).digest();
  return `SVCW${[...digest.subarray(0, 16)].map((b) => BASE32[b & 31]).join("")}`;
}

/**
 * The S3 endpoint a worker is given: the volume's own path under the service's public address. The helper
 * addresses buckets path-style under it, so whatever bucket it names (its default is the month, `MM-YY`) becomes a
 * top-level folder of the volume, and the URLs it presigns are signed for the public host, where clients fetch
 * them. Pure.
 */
export function workerBucketEndpoint(s3Endpoint: string, volumeId: string): string {
  return `${s3Endpoint.replace(/\/+$/, "")}/${volumeId}`;
}

const NAME_PREFIX = "worker ";

/** Whether a key is a worker's (its id is the one derived from the worker id its name carries). Pure. */
export function isWorkerBucketKey(k: Pick<VolumeKeyRecord, "id" | "name">): boolean {
  const workerId = k.name?.startsWith(NAME_PREFIX) ? k.name.slice(NAME_PREFIX.length).split(" ")[0] : undefined;
  return workerId !== undefined && k.id === workerBucketKeyId(workerId);
}

/**
 * Whether a revoked key still answers this request: a worker's key, a presigned GET or HEAD, signed before the
 * key was revoked (its expiry is checked as for any presigned URL). Pure.
 */
export function presignedReadOutlivesRevocation(
  k: Pick<VolumeKeyRecord, "id" | "name" | "revokedAt">,
  claim: Pick<SignatureClaim, "form" | "date">,
  method: string,
): boolean {
  return (
    k.revokedAt !== null && isWorkerBucketKey(k) && claim.form === "query" && (method === "GET" || method === "HEAD") && claim.date.getTime() < k.revokedAt
  );
}

export interface WorkerBucketDeps {
  keys: VolumeKeyStore;
  box: SecretBox;
  /** The S3 API as clients reach it: `<public url>/s3` (`publicUrl`, else the listening address). */
  s3Endpoint: string;
}

/** Make the worker's key on `volumeId` (owned by the endpoint's user) and say how the worker reaches it. */
export async function mintWorkerBucket(
  deps: WorkerBucketDeps,
  w: { userId: string; workerId: string; endpointName: string; volumeId: string },
): Promise<WorkerBucket> {
  const secret = newSecretAccessKey();
  const base = {
    id: workerBucketKeyId(w.workerId),
    userId: w.userId,
    name: `${NAME_PREFIX}${w.workerId} of ${w.endpointName}`,
    readOnly: false,
    volumeIds: [w.volumeId],
    createdAt: Date.now(),
    revokedAt: null,
  };
  const { sealed, keyId } = deps.box.seal(secret, keyBinding(base));
  const record: VolumeKeyRecord = { ...base, sealed, keyId };
  await deps.keys.insert(record);
  return { endpointUrl: workerBucketEndpoint(deps.s3Endpoint, w.volumeId), accessKeyId: record.id, secretAccessKey: secret };
}

/** Revoke the worker's key, if it had one (a worker of an endpoint without a volume had none). */
export async function revokeWorkerBucket(deps: Pick<WorkerBucketDeps, "keys">, workerId: string): Promise<void> {
  await deps.keys.revoke(workerBucketKeyId(workerId), Date.now());
}
