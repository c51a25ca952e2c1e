// Where build artifacts live. Each replica keeps the artifacts it uses under `<dataDir>/artifacts/<sha256>.tar.gz`
// (workers are started from there, and fetch from there over HTTP). With one service that is all; with replicas
// on PostgreSQL an artifact is also published into the database when it is uploaded, before the upload is
// acknowledged, and a replica that lacks it (the leader starting a worker, a replica serving a worker's download)
// fetches it from there into its own directory, checking its sha256, once.

import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Queryable } from "../store/queryable.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../store/private-files.js";

export interface ArtifactStore {
  /** Make the artifact at `path` (named `<sha256>.tar.gz`) reachable from every replica. */
  publish(path: string): Promise<void>;
  /** A path on this machine holding the artifact another replica may have recorded as `path`. */
  local(path: string): Promise<string>;
}

const PART_BYTES = 1024 * 1024;

/** The artifact is in neither place: truly absent (its other failures are the store's or its bytes'). */
export class ArtifactMissing extends Error {}

/** The artifact's sha256 from its stored name, or undefined. Pure. */
export function artifactSha(path: string): string | undefined {
  return /^([a-f0-9]{64})\.tar\.gz$/.exec(basename(path))?.[1];
}

/** One service: the data directory is the only place, and every path recorded is this machine's. */
export const localArtifacts: ArtifactStore = {
  publish: async () => undefined,
  local: async (path) => path,
};

export function postgresArtifacts(options: {
  dataDir: string;
  db: Queryable;
  transaction<T>(body: (client: Queryable) => Promise<T>): Promise<T>;
}): ArtifactStore {
  const fetching = new Map<string, Promise<string>>();
  const ownPath = (sha: string) => join(options.dataDir, "artifacts", `${sha}.tar.gz`);

  const fetch = async (sha: string, target: string): Promise<string> => {
    const { rows } = await options.db.query<{ size: number; parts: number }>("SELECT size, parts FROM svc_artifacts WHERE sha256 = $1", [sha]);
    const meta = rows[0];
    if (!meta) throw new ArtifactMissing(`artifact ${sha} is neither on this machine nor in the database`);
    await mkdir(join(options.dataDir, "artifacts"), { recursive: true, mode: PRIVATE_DIR_MODE });
    const temp = `${target}.${process.pid}.${Date.now()}.fetch.tmp`;
    // Users' code is the service's to read: workers get it through their driver, never from this directory.
    const file = await open(temp, "w", PRIVATE_FILE_MODE);
    const hash = createHash("sha256");
    try {
      // Part by part: an artifact may be large, and is never held in memory whole.
      for (let part = 0; part < meta.parts; part++) {
        const { rows: data } = await options.db.query<{ data: Buffer }>("SELECT data FROM svc_artifact_parts WHERE sha256 = $1 AND part = $2", [sha, part]);
        if (!data[0]) throw new Error(`artifact ${sha} is missing part ${part} in the database`);
        hash.update(data[0].data);
        await file.write(data[0].data);
      }
      await file.close();
      const got = hash.digest("hex");
      if (got !== sha) throw new Error(`artifact ${sha} read from the database has sha256 ${got}: refused`);
      await rename(temp, target);
      return target;
    } catch (err) {
      await file.close().catch(() => undefined /* already closed */);
      await rm(temp, { force: true });
      throw err;
    }
  };

  return {
    async publish(path) {
      const sha = artifactSha(path);
      if (!sha) throw new Error(`${path} is not named by its sha256`);
      const { rows } = await options.db.query("SELECT 1 FROM svc_artifacts WHERE sha256 = $1", [sha]);
      if (rows.length > 0) return;
      const size = (await stat(path)).size;
      await options.transaction(async (client) => {
        let part = 0;
        let pending: Buffer = Buffer.alloc(0);
        const flush = async (data: Buffer) => {
          await client.query("INSERT INTO svc_artifact_parts (sha256, part, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [sha, part++, data]);
        };
        for await (const chunk of createReadStream(path, { highWaterMark: PART_BYTES })) {
          pending = pending.length === 0 ? (chunk as Buffer) : Buffer.concat([pending, chunk as Buffer]);
          while (pending.length >= PART_BYTES) {
            await flush(pending.subarray(0, PART_BYTES));
            pending = pending.subarray(PART_BYTES);
          }
        }
        if (pending.length > 0 || part === 0) await flush(pending);
        // Two replicas publishing the same build: the first row wins, the parts are the same bytes.
        await client.query("INSERT INTO svc_artifacts (sha256, size, parts, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", [
          sha,
          size,
          part,
          Date.now(),
        ]);
      });
    },
    async local(path) {
      if (existsSync(path)) return path;
      const sha = artifactSha(path);
      if (!sha) return path;
      const target = ownPath(sha);
      if (existsSync(target)) return target;
      let pending = fetching.get(sha);
      if (!pending) {
        pending = fetch(sha, target).finally(() => fetching.delete(sha));
        fetching.set(sha, pending);
      }
      return pending;
    },
  };
}
