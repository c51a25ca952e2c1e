// An environment known only by its endpoints (no record of it: an older svc dev deployed it), and endpoints'
// logs (stored, or followed).

import type { ServerResponse } from "node:http";
import { canUseJobs } from "./keys/auth.js";
import { intParam, sendJson, sendPieces, writable } from "./http/wire.js";
import { HttpProblem } from "./http/problems.js";
import type { LogRow } from "./store/types.js";
import type { RouteCall as Call } from "./http/router.js";
import type { EndpointRow } from "./store/types.js";
import type { JobEngine } from "./engine/index.js";
import type { ClientGuards } from "./http/slow-clients.js";
import { userEndpoint } from "./jobs/routes.js";
import { droppedCount } from "./engine/index.js";

/** What the state routes read: the endpoints served, their logs, and the limits on slow followers. */
export interface StateDeps {
  url: string;
  endpoints: ReadonlyMap<string, EndpointRow>;
  engine: Pick<JobEngine, "queryLogs" | "followLogs" | "droppedLogLines">;
  clients: ClientGuards;
  /** Open log follows, ended when the service closes. */
  followers: Set<ServerResponse>;
}

type RouteCall = Call<StateDeps>;

/** GET /v1/apps/{app}/environments/{env} of an environment with endpoints but no record (deploy/routes.ts asks). */
export function appEnvironment(call: RouteCall): void {
  const { ctx, principal, res } = call;
  const { app, env } = call.params as { app: string; env: string };
  const endpoints = [...ctx.endpoints.values()].filter((e) => e.userId === principal.userId && e.app === app && e.env === env);
  if (endpoints.length === 0) throw new HttpProblem(404, `No app "${app}" with environment "${env}"`);
  const visible = endpoints.filter((e) => canUseJobs(principal, e.id));
  if (visible.length === 0) throw new HttpProblem(403, `This API key has no access to app "${app}", environment "${env}"`);
  sendJson(res, {
    app,
    env,
    endpoints: visible.sort((a, b) => a.name.localeCompare(b.name)).map((e) => ({ name: e.name, id: e.id, url: `${ctx.url}/v2/${e.id}`, type: e.type })),
  });
}

/** A line as the logs API gives it; the service's notice of dropped lines (engine/log-quota.ts) also has their count. */
function logJson(l: LogRow): string {
  const dropped = droppedCount(l);
  return JSON.stringify(
    dropped === undefined
      ? { ts: l.ts, workerId: l.workerId, jobId: l.jobId, stream: l.stream, text: l.text }
      : { ts: l.ts, workerId: l.workerId, jobId: l.jobId, stream: l.stream, text: l.text, dropped },
  );
}

/** GET /v1/endpoints/{id}/logs: stored lines, or with `follow` the backlog and then new lines as NDJSON. */
export async function logs(call: RouteCall): Promise<void> {
  const { ctx, principal, res, url } = call;
  const endpointId = userEndpoint(ctx, principal, call.params.endpoint!).id;
  const jobId = url.searchParams.get("job") ?? undefined;
  const since = intParam(url, "since", 0, Number.MAX_SAFE_INTEGER);
  const follow = ["1", "true"].includes(url.searchParams.get("follow") ?? "");
  if (!follow) {
    const rows = await ctx.engine.queryLogs({ endpointId, jobId, since, limit: LOG_LINES_MAX });
    const pieces: string[] = ['{"lines":['];
    rows.forEach((row, i) => pieces.push(i === 0 ? logJson(row) : `,${logJson(row)}`));
    // Lines the quotas dropped among all the lines asked for (also beyond this answer's first LOG_LINES_MAX).
    const dropped = await ctx.engine.droppedLogLines({ endpointId, jobId, since });
    pieces.push(`],"dropped":${dropped}}`);
    return sendPieces(res, pieces, ctx.clients.limits.sendStallMs);
  }
  const release = ctx.clients.followers.admit(principal.userId);
  const { sendStallMs, followerQueueBytes } = ctx.clients.limits;
  let stall: NodeJS.Timeout | undefined;
  let stop: (() => void) | undefined;
  const end = () => {
    stop?.();
    clearTimeout(stall);
    release();
    ctx.followers.delete(res);
  };
  // res "close" is the client going away (req "close" fires as soon as the request body is read).
  res.on("close", end);
  ctx.followers.add(res);
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  // Send the headers now: a follower with no lines yet must still see the stream open.
  res.flushHeaders();
  /** A follower that reads nothing for the stall timeout is dropped. */
  const watchStall = () => {
    if (!res.writableNeedDrain || stall) return;
    stall = setTimeout(() => res.destroy(), sendStallMs);
    res.once("drain", () => {
      clearTimeout(stall);
      stall = undefined;
    });
  };
  const subscribe = () =>
    ctx.engine.followLogs(endpointId, (lines) => {
      const wanted = lines.filter((l) => (!jobId || l.jobId === jobId) && (since === undefined || l.ts >= since));
      if (wanted.length === 0 || res.destroyed) return;
      res.write(`${wanted.map(logJson).join("\n")}\n`);
      // A follower that falls this far behind is dropped rather than buffered without end.
      if (res.writableLength > followerQueueBytes) return res.destroy();
      watchStall();
    });
  // The backlog (its first LOG_LINES_MAX lines), a page at a time as the client reads it: a paused follower holds
  // one page, not the whole backlog.
  let afterId: number | undefined;
  for (let sent = 0; !res.destroyed; ) {
    const page = await ctx.engine.queryLogs({ endpointId, jobId, since, afterId, limit: Math.min(FOLLOW_PAGE, LOG_LINES_MAX - sent) });
    const last = page.length < FOLLOW_PAGE || sent + page.length >= LOG_LINES_MAX;
    // Follow before anything else runs: no line lands between this read and the follow.
    if (last && !res.destroyed) stop = subscribe();
    if (page.length === 0) return;
    sent += page.length;
    afterId = page[page.length - 1]!.seq;
    const ok = res.write(`${page.map(logJson).join("\n")}\n`);
    if (last) return watchStall();
    if (!ok && !(await writable(res, sendStallMs))) return;
    // One page per turn of the event loop: other requests are served between pages of many followers.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Stored log lines a logs request returns (before following). */
const LOG_LINES_MAX = 10_000;
/** Backlog lines read and written to a follower at once. */
const FOLLOW_PAGE = 25;
