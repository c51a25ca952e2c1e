// What a release is at each step: the pure transitions of a release record. The manager (manager.ts) does the
// I/O: it starts probe workers, hears whether they came up, and writes the record.
//
// A release activates a build in an environment. The endpoints it creates or changes must each show one new
// worker that loads its handler (a load-balanced one: answers /ping 200) before anything switches; then all of
// them switch at once. One endpoint that cannot start after its attempts fails the whole release: no endpoint of
// the environment switches, the previous build keeps serving.

import type { ReleaseEndpoint, ReleaseRow } from "../store/deploy-rows.js";

/** Lines of a worker's error kept in the release record (the head of a stack says where it failed). */
export const ERROR_LINES = 12;

/** The first lines of a start error, for the record and the CLI. Pure. */
export function errorHead(message: string, lines = ERROR_LINES): string {
  const all = message.split("\n");
  return all.length <= lines ? message : [...all.slice(0, lines), `... (${all.length - lines} more lines in the endpoint's logs)`].join("\n");
}

export function newRelease(
  input: Omit<ReleaseRow, "state" | "finishedAt" | "error" | "endpoints"> & { endpoints: Array<Pick<ReleaseEndpoint, "name" | "id" | "action">> },
): ReleaseRow {
  return {
    ...input,
    state: "starting",
    finishedAt: null,
    error: null,
    endpoints: input.endpoints.map((e) => ({ ...e, state: "starting", attempts: 0, failures: 0, error: null })),
  };
}

function withEndpoint(release: ReleaseRow, endpointId: string, change: (e: ReleaseEndpoint) => ReleaseEndpoint): ReleaseRow {
  return { ...release, endpoints: release.endpoints.map((e) => (e.id === endpointId ? change(e) : e)) };
}

/** A probe worker was started for this endpoint. */
export function probeStarted(release: ReleaseRow, endpointId: string): ReleaseRow {
  return withEndpoint(release, endpointId, (e) => ({ ...e, attempts: e.attempts + 1 }));
}

/** A probe came up. `switchNow`: every endpoint has one, the release may switch. */
export function probeReady(release: ReleaseRow, endpointId: string): { release: ReleaseRow; switchNow: boolean } {
  if (release.state !== "starting") return { release, switchNow: false };
  const next = withEndpoint(release, endpointId, (e) => (e.state === "starting" ? { ...e, state: "ready" } : e));
  return { release: next, switchNow: next.endpoints.every((e) => e.state === "ready") };
}

/**
 * A probe failed to start. `retry`: start another one for this endpoint; otherwise, when the endpoint is out of
 * attempts, the whole release failed (its record says which endpoint and why).
 */
export function probeFailed(
  release: ReleaseRow,
  endpointId: string,
  message: string,
  maxAttempts: number,
  now: number,
): { release: ReleaseRow; retry: boolean } {
  if (release.state !== "starting") return { release, retry: false };
  const endpoint = release.endpoints.find((e) => e.id === endpointId);
  if (!endpoint || endpoint.state === "ready") return { release, retry: false };
  const failures = endpoint.failures + 1;
  const error = errorHead(message);
  const outOfAttempts = failures >= maxAttempts;
  const next = withEndpoint(release, endpointId, (e) => ({ ...e, failures, error, state: outOfAttempts ? "failed" : e.state }));
  if (!outOfAttempts) return { release: next, retry: true };
  return { release: { ...next, state: "failed", finishedAt: now, error: { endpoint: endpoint.name, message: error } }, retry: false };
}

/** The switch was written: the release is what the environment runs. */
export function released(release: ReleaseRow, now: number): ReleaseRow {
  return { ...release, state: "live", finishedAt: now };
}

/** The switch itself failed (the store refused it): nothing changed. */
export function switchFailed(release: ReleaseRow, message: string, now: number): ReleaseRow {
  return { ...release, state: "failed", finishedAt: now, error: { endpoint: "", message: `the switch could not be recorded: ${message}` } };
}

/** A newer release of the same environment took over before this one settled. */
export function superseded(release: ReleaseRow, now: number): ReleaseRow {
  return release.state === "starting" ? { ...release, state: "superseded", finishedAt: now } : release;
}

/**
 * An environment's releases as answered, newest first: one is live, the newest that went live (what the
 * environment runs); each earlier one that went live is `replaced`. Records are not rewritten: a release's record
 * says what became of it, and only a newer one can replace it. Pure.
 */
export function oneLive(newestFirst: readonly ReleaseRow[]): ReleaseRow[] {
  let seenLive = false;
  return newestFirst.map((r) => {
    if (r.state !== "live") return r;
    if (!seenLive) {
      seenLive = true;
      return r;
    }
    return { ...r, state: "replaced" };
  });
}
