// GET /_worker/v1/artifacts/{sha256}: the artifact a worker runs, over HTTP, with its worker token. A worker on
// another machine (a container on a cluster, a remote box) is handed this URL instead of a host path; the runtime
// downloads it (and checks it, as it checks any artifact) before loading its handler.

import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { pipeline } from "node:stream/promises";
import type { RouteCall } from "../http/router.js";
import type { ReleaseManager } from "../releases/manager.js";
import type { EndpointRow } from "../store/types.js";
import { ArtifactMissing, type ArtifactStore } from "./store.js";
import { HttpProblem } from "../http/problems.js";
import { storageCause } from "../store/faults.js";
import { errorMessage } from "../../errors.js";

export const ARTIFACT_ROUTE = "/_worker/v1/artifacts/";

/** The URL a worker downloads its endpoint's artifact from (the file is stored as `<sha256>.tar.gz`). Pure. */
export function artifactUrl(serviceUrl: string, artifactPath: string): string | undefined {
  const m = /^([a-f0-9]{64})\.tar\.gz$/.exec(basename(artifactPath));
  return m ? `${serviceUrl.replace(/\/+$/, "")}${ARTIFACT_ROUTE}${m[1]}` : undefined;
}

/** What serving an artifact needs: where artifacts are, and which one a worker's endpoint runs. */
export interface ArtifactDeps {
  artifacts: Pick<ArtifactStore, "local">;
  endpoints: ReadonlyMap<string, EndpointRow>;
  releases?: Pick<ReleaseManager, "endpointFor">;
  log(message: string): void;
}

function notHere(sha: string): HttpProblem {
  return new HttpProblem(404, `Artifact ${sha} is not on this service`);
}

/** GET and HEAD, worker tokens only (the route table says so). */
export async function serveArtifact(call: RouteCall<ArtifactDeps>): Promise<void> {
  const { ctx, principal, req, res } = call;
  const sha = call.params.sha!;
  const { workerId, endpointId } = principal.worker!;
  // A release's probe runs the new build (its endpoint may not be in the service yet).
  const endpoint = ctx.releases?.endpointFor(workerId) ?? ctx.endpoints.get(endpointId);
  // Only the artifact of the worker's own endpoint: one tenant's token never reads another tenant's code.
  if (!endpoint || !/^[a-f0-9]{64}$/.test(sha) || basename(endpoint.artifactPath) !== `${sha}.tar.gz`) {
    throw new HttpProblem(404, `No artifact ${sha} for this worker's endpoint`);
  }
  // Another replica may have received the upload: the artifact is fetched here from the shared store first.
  // Only its absence is a 404: a store that fails is the dispatcher's 503 (store/faults.ts), and any other
  // failure (a refused query, bytes that fail their sha256) is answered as what it is, and logged.
  let path: string;
  try {
    path = await ctx.artifacts.local(endpoint.artifactPath);
  } catch (err) {
    if (err instanceof ArtifactMissing) throw notHere(sha);
    if (storageCause(err)) throw err;
    ctx.log(`could not read artifact ${sha} for worker ${workerId}: ${errorMessage(err)}`);
    throw new HttpProblem(500, `Artifact ${sha} could not be read: ${errorMessage(err)}`);
  }
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (!info) throw notHere(sha);
  res.writeHead(200, {
    "content-type": "application/gzip",
    "content-length": info.size,
    etag: `"${sha}"`,
    "cache-control": "private, max-age=31536000, immutable",
  });
  if (req.method === "HEAD") return void res.end();
  // A reader that goes away mid-file ends the pipeline; nothing to clean up, nothing to answer.
  await pipeline(createReadStream(path), res).catch(() => undefined);
}
