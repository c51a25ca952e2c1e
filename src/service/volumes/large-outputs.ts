// Large outputs (an endpoint's `largeOutputBytes`): a completed job's output whose JSON is larger than the setting
// is written to the endpoint's network volume, at `outputs/<job id>.json`, and the job's output becomes a link
// to it, presigned with the key of the worker that produced it (worker-bucket.ts: its presigned reads outlive
// the worker). So a multi-MB result is neither kept in the job store nor sent through `/status`, and the client
// downloads it from the S3 API. docs/volumes.md, "Large outputs".

import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DoneResult } from "../engine/index.js";
import { volumeDir } from "../management/context.js";
import type { SecretBox } from "../secrets/box.js";
import type { EndpointRow } from "../store/types.js";
import type { VolumeKeyStore } from "./key-store.js";
import { keyBinding } from "./keys.js";
import { MAX_PRESIGNED_SECONDS, presignGet } from "./sigv4.js";
import { workerBucketEndpoint, workerBucketKeyId } from "./worker-bucket.js";
import { errorMessage } from "../../errors.js";

/** The folder of the volume large outputs are written to. */
export const LARGE_OUTPUT_FOLDER = "outputs";

/** What a job's output is, in place of an output written to the volume. */
export interface LargeOutputLink {
  largeOutput: {
    /** A GET URL presigned for 7 days: the output's JSON, exactly as it would have been the job's output. */
    url: string;
    /** Its size in bytes, and the SHA-256 of those bytes (hex). */
    bytes: number;
    sha256: string;
    contentType: "application/json";
    /** Where it is: the volume (bucket) and the key (path in the volume). */
    volumeId: string;
    key: string;
    /** When the URL stops working (ISO 8601); the file stays until it is deleted. */
    expiresAt: string;
  };
}

/** The output's JSON text when it is larger than `thresholdBytes` (and so goes to the volume); else undefined. Pure. */
export function oversizeOutput(output: unknown, thresholdBytes: number | undefined): Buffer | undefined {
  if (thresholdBytes === undefined || output === undefined) return undefined;
  const text = Buffer.from(JSON.stringify(output), "utf8");
  return text.length > thresholdBytes ? text : undefined;
}

export interface LargeOutputsDeps {
  dataDir: string;
  /** The S3 API as clients reach it (`<public url>/s3`): the links are signed for that host. */
  s3Endpoint: string;
  keys: VolumeKeyStore;
  box: SecretBox;
  endpoint(endpointId: string): EndpointRow | undefined;
  volumeOf(endpoint: EndpointRow): { id: string } | undefined;
  log(message: string): void;
  now?(): number;
}

export class LargeOutputs {
  constructor(private readonly deps: LargeOutputsDeps) {}

  /**
   * The results with each completed job's oversize output written to the volume and replaced by its link. A
   * result that cannot be (no volume, no key of the worker, a write that fails) keeps its output, said in the log:
   * the output itself is never lost.
   */
  async offload(workerId: string, endpointId: string, results: DoneResult[]): Promise<DoneResult[]> {
    const endpoint = this.deps.endpoint(endpointId);
    const threshold = endpoint?.resource.largeOutputBytes;
    if (!endpoint || threshold === undefined) return results;
    return Promise.all(
      results.map(async (r) => {
        const text = r.status === "COMPLETED" ? oversizeOutput(r.output, threshold) : undefined;
        if (!text) return r;
        try {
          return { ...r, output: await this.write(endpoint, workerId, r.jobId, text) };
        } catch (err) {
          this.deps.log(`the output of job ${r.jobId} (${text.length} bytes) stays in the job store: ${errorMessage(err)}`);
          return r;
        }
      }),
    );
  }

  private async write(endpoint: EndpointRow, workerId: string, jobId: string, text: Buffer): Promise<LargeOutputLink> {
    const volume = this.deps.volumeOf(endpoint);
    if (!volume) throw new Error(`endpoint ${endpoint.name} has no network volume`);
    const record = await this.deps.keys.key(workerBucketKeyId(workerId));
    if (!record || record.revokedAt !== null) throw new Error(`worker ${workerId} holds no S3 key to sign the output's link with`);
    const secretAccessKey = this.deps.box.open(record.sealed, record.keyId, keyBinding(record));
    if (secretAccessKey === undefined) throw new Error(`the S3 key of worker ${workerId} cannot be opened with the configured secrets keys`);
    if (!/^[A-Za-z0-9_-]+$/.test(jobId)) throw new Error(`job id ${jobId} is not a file name`);
    const key = `${LARGE_OUTPUT_FOLDER}/${jobId}.json`;
    const folder = join(volumeDir(this.deps.dataDir, volume.id), LARGE_OUTPUT_FOLDER);
    await mkdir(folder, { recursive: true, mode: 0o777 });
    await chmod(folder, 0o777);
    // Whole or not at all: written aside, then renamed into place.
    const partial = join(folder, `.svc-output-${randomBytes(6).toString("hex")}`);
    try {
      await writeFile(partial, text, { mode: 0o666 });
      await rename(partial, join(folder, `${jobId}.json`));
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    const now = new Date(this.deps.now?.() ?? Date.now());
    const url = await presignGet(
      `${workerBucketEndpoint(this.deps.s3Endpoint, volume.id)}/${key}`,
      { accessKeyId: record.id, secretAccessKey },
      MAX_PRESIGNED_SECONDS,
      now,
    );
    return {
      largeOutput: {
        url,
        bytes: text.length,
        sha256: createHash("sha256").update(text).digest("hex"),
        contentType: "application/json",
        volumeId: volume.id,
        key,
        expiresAt: new Date(now.getTime() + MAX_PRESIGNED_SECONDS * 1000).toISOString(),
      },
    };
  }
}
