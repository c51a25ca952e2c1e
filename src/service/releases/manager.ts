// Releases: surge, then switch. Activating a build starts one probe worker for each endpoint it creates or
// changes, beside the workers that serve now. A probe loads the new code but takes no job (a load-balanced one
// gets no traffic) until the switch. When every probe has come up, the switch is written in one store batch and
// the probes become ordinary workers; the scaler then drains the old ones. A probe that fails to start is
// replaced, up to `attempts`; an endpoint out of attempts fails the release: the probes stop and nothing switched.
// The transitions are pure (state.ts); this class does the I/O around them.

import type { WorkerExit } from "../../drivers/types.js";
import type { ReleaseRow } from "../store/deploy-rows.js";
import type { EndpointRow, StoreOp } from "../store/types.js";
import { newRelease, probeFailed, probeReady, probeStarted, released, superseded, switchFailed } from "./state.js";

/** What the manager needs of the scaler: probe workers, started and stopped on its word. */
/** What a release's new worker waits for before it can start: the reason shown, and whether a download is under way. */
export interface ProbeWait {
  text: string;
  fetching: boolean;
}

export interface ProbeRunner {
  /** Start a worker of `row` (the endpoint as the release makes it) that takes no job yet; returns its id. */
  startProbe(row: EndpointRow): string;
  /** Stop a probe at once (it failed, or its release did). */
  stopProbe(workerId: string): void;
  /** The probes become workers of their endpoints (after the switch). */
  promote(workerIds: string[]): void;
  /**
   * Whether it can start workers of `row` at all (an image endpoint needs a driver that runs images). One it cannot
   * is not probed: it switches with the others and waits, saying why, as it would without any driver.
   */
  runs?(row: EndpointRow): boolean;
  /** What a probe waits for before it starts (a GPU, its models); `fetching`: a download under way. */
  probeWait?(endpointId: string): ProbeWait | undefined;
  /** When the probe began to start once nothing held it back; undefined while it waits. */
  probeLaunchedAt?(workerId: string): number | undefined;
}

export interface ReleaseRequest {
  userId: string;
  app: string;
  env: string;
  buildId: string;
  previousBuildId: string | null;
  kind: ReleaseRow["kind"];
  /** The endpoints the release creates or changes, as rows of the new build. */
  probe: Array<{ row: EndpointRow; action: "create" | "update" }>;
  /**
   * Write the switch (with `extra`, the release's own record, in the same batch) and make it what the service
   * serves. Called once, when every probe is up (or at once when nothing needs one).
   */
  commit(extra: StoreOp[]): Promise<void>;
}

export interface ReleaseOptions {
  write(ops: StoreOp[]): Promise<void>;
  runner(): ProbeRunner | undefined;
  log(message: string): void;
  /** Probe workers tried per endpoint before the release fails (default 3). */
  attempts: number;
  /** How long a probe may take to come up (start, load its handler, /ping 200) before it counts as failed. */
  startTimeoutMs: number;
  /** A probe failed to start (for /health's unhealthy workers and the endpoint's last start error). */
  onStartFailure?(endpointId: string, workerId: string, message: string): void;
}

interface Probe {
  workerId: string;
  endpointId: string;
  /** Its start timeout (re-armed while its models download). */
  timer?: NodeJS.Timeout;
  /** Its last lines on stderr: the error when it exits without saying why. */
  lines: string[];
}

interface Active {
  release: ReleaseRow;
  rows: Map<string, EndpointRow>;
  probes: Map<string, Probe>;
  commit: ReleaseRequest["commit"];
  settle(release: ReleaseRow): void;
  switching: boolean;
}

const PROBE_LINES = 20;
const RETRY_BASE_MS = 500;

function envKey(userId: string, app: string, env: string): string {
  return `${userId}\0${app}\0${env}`;
}

function newReleaseId(now: number): string {
  return `r${now.toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

export class ReleaseManager {
  private readonly active = new Map<string, Active>();
  private readonly probeOwners = new Map<string, Active>();
  private closed = false;

  constructor(private readonly options: ReleaseOptions) {}

  /**
   * Begin a release. Without probes to run (nothing created or changed, or no driver to run workers) it switches
   * before this returns. `settled` resolves with the final record (live, failed or superseded).
   */
  async begin(request: ReleaseRequest): Promise<{ release: ReleaseRow; settled: Promise<ReleaseRow> }> {
    const now = Date.now();
    const key = envKey(request.userId, request.app, request.env);
    const runner = this.options.runner();
    let release = newRelease({
      id: newReleaseId(now),
      userId: request.userId,
      app: request.app,
      env: request.env,
      buildId: request.buildId,
      previousBuildId: request.previousBuildId,
      kind: request.kind,
      startedAt: now,
      endpoints: request.probe.map((p) => ({ name: p.row.name, id: p.row.id, action: p.action })),
    });
    const unrunnable = new Set(request.probe.filter((p) => runner?.runs && !runner.runs(p.row)).map((p) => p.row.id));
    if (unrunnable.size > 0) {
      release = { ...release, endpoints: release.endpoints.map((e) => (unrunnable.has(e.id) ? { ...e, state: "ready" } : e)) };
      request = { ...request, probe: request.probe.filter((p) => !unrunnable.has(p.row.id)) };
    }
    const earlier = this.active.get(key);
    if (earlier) await this.finish(earlier, superseded(earlier.release, now));
    if (!runner || request.probe.length === 0) {
      // Nothing has to prove it starts: switch now, as one batch with the record.
      release = released({ ...release, endpoints: release.endpoints.map((e) => ({ ...e, state: "ready" })) }, Date.now());
      await request.commit([{ op: "upsertRelease", release }]);
      return { release, settled: Promise.resolve(release) };
    }
    await this.options.write([{ op: "upsertRelease", release }]);
    let settle!: (r: ReleaseRow) => void;
    const settled = new Promise<ReleaseRow>((resolve) => (settle = resolve));
    const active: Active = {
      release,
      rows: new Map(request.probe.map((p) => [p.row.id, p.row])),
      probes: new Map(),
      commit: request.commit,
      settle,
      switching: false,
    };
    this.active.set(key, active);
    for (const p of request.probe) this.startProbe(active, p.row.id);
    this.options.log(`release ${release.id} of ${request.app}/${request.env}: starting new workers of ${request.probe.map((p) => p.row.name).join(", ")}`);
    return { release: active.release, settled };
  }

  /** The starting release of an environment, if one is. */
  starting(userId: string, app: string, env: string): ReleaseRow | undefined {
    return this.active.get(envKey(userId, app, env))?.release;
  }

  /** The endpoint a probe worker runs (a new endpoint has no row in the service yet). */
  endpointFor(workerId: string): EndpointRow | undefined {
    const owner = this.probeOwners.get(workerId);
    const probe = owner?.probes.get(workerId);
    return probe ? owner!.rows.get(probe.endpointId) : undefined;
  }

  isProbe(workerId: string): boolean {
    return this.probeOwners.has(workerId);
  }

  /** A probe loaded its handler (queue: it registered; load-balanced: /ping answered 200). */
  ready(workerId: string): void {
    const owner = this.probeOwners.get(workerId);
    const probe = owner?.probes.get(workerId);
    if (!owner || !probe || owner.switching) return;
    clearTimeout(probe.timer);
    const { release, switchNow } = probeReady(owner.release, probe.endpointId);
    owner.release = release;
    if (switchNow) void this.switchOver(owner);
    else void this.record(release);
  }

  /** Whether a probe has shown its code starts: its endpoint counts ready in its release. */
  proven(workerId: string): boolean {
    const owner = this.probeOwners.get(workerId);
    const probe = owner?.probes.get(workerId);
    return probe !== undefined && owner!.release.endpoints.find((e) => e.id === probe.endpointId)?.state === "ready";
  }

  /** A line a probe wrote (its stderr tail explains an exit without a word). */
  line(workerId: string, stream: string, text: string): void {
    const probe = this.probeOwners.get(workerId)?.probes.get(workerId);
    if (!probe || stream !== "stderr") return;
    probe.lines.push(text);
    if (probe.lines.length > PROBE_LINES) probe.lines.shift();
  }

  /** A probe said it cannot start (the runtime's fail-start: the handler's import threw, the artifact was refused). */
  failed(workerId: string, message: string): void {
    const owner = this.probeOwners.get(workerId);
    const probe = owner?.probes.get(workerId);
    if (!owner || !probe) return;
    const endpoint = owner.release.endpoints.find((e) => e.id === probe.endpointId);
    // Once up, a probe that later dies is the scaler's business like any worker's.
    if (endpoint?.state === "ready") return;
    this.dropProbe(owner, probe);
    this.options.onStartFailure?.(probe.endpointId, workerId, message);
    const { release, retry } = probeFailed(owner.release, probe.endpointId, message, this.options.attempts, Date.now());
    owner.release = release;
    if (retry) {
      const delay = RETRY_BASE_MS * 2 ** (release.endpoints.find((e) => e.id === probe.endpointId)!.failures - 1);
      void this.record(release);
      setTimeout(() => {
        if (!this.closed && this.active.get(envKey(release.userId, release.app, release.env)) === owner && owner.release.state === "starting")
          this.startProbe(owner, probe.endpointId);
      }, delay).unref();
      return;
    }
    const failedEndpoint = release.error?.endpoint ?? "";
    this.options.log(
      `release ${release.id} of ${release.app}/${release.env} failed: endpoint ${failedEndpoint} could not start; the previous build keeps serving`,
    );
    void this.finish(owner, release);
  }

  /** A probe's process ended before it came up. */
  exited(workerId: string, exit: WorkerExit | { error: string }): void {
    const probe = this.probeOwners.get(workerId)?.probes.get(workerId);
    if (!probe) return;
    const why = "error" in exit ? exit.error : `the worker exited before it was ready (code ${exit.code}, signal ${exit.signal})`;
    const tail = "error" in exit || probe.lines.length === 0 ? "" : `; its last output:\n${probe.lines.join("\n")}`;
    this.failed(workerId, `${why}${tail}`);
  }

  close(): void {
    this.closed = true;
    for (const owner of this.active.values()) for (const probe of owner.probes.values()) clearTimeout(probe.timer);
  }

  private startProbe(owner: Active, endpointId: string): void {
    const runner = this.options.runner();
    const row = owner.rows.get(endpointId)!;
    if (!runner) return;
    const workerId = runner.startProbe(row);
    const timeoutMs = this.options.startTimeoutMs;
    const probe: Probe = { workerId, endpointId, lines: [] };
    const expire = () => {
      const ready = row.type === "lb" ? "answered /ping with 200" : "loaded its handler";
      const runner = this.options.runner();
      const waiting = runner?.probeWait?.(endpointId);
      // A model still downloading is not a worker that failed to start: its start time counts from the end of the
      // download (a large model takes minutes), and the release says how far it is meanwhile.
      const launchedAt = waiting ? undefined : runner?.probeLaunchedAt?.(workerId);
      const left = waiting?.fetching ? timeoutMs : launchedAt === undefined ? 0 : launchedAt + timeoutMs - Date.now();
      if (left > 0) {
        probe.timer = setTimeout(expire, left);
        probe.timer.unref();
        return;
      }
      // A probe that never got a GPU (or its models) says so: the release fails for that, not for a slow worker.
      const seconds = Math.round(timeoutMs / 1000);
      this.failed(workerId, waiting ? `the new worker could not start in ${seconds} s: ${waiting.text}` : `the new worker had not ${ready} after ${seconds} s`);
    };
    probe.timer = setTimeout(expire, timeoutMs);
    probe.timer.unref();
    owner.probes.set(workerId, probe);
    this.probeOwners.set(workerId, owner);
    owner.release = probeStarted(owner.release, endpointId);
  }

  private dropProbe(owner: Active, probe: Probe): void {
    clearTimeout(probe.timer);
    owner.probes.delete(probe.workerId);
    this.probeOwners.delete(probe.workerId);
    this.options.runner()?.stopProbe(probe.workerId);
  }

  private async switchOver(owner: Active): Promise<void> {
    owner.switching = true;
    const live = released(owner.release, Date.now());
    try {
      await owner.commit([{ op: "upsertRelease", release: live }]);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.options.log(`release ${live.id} of ${live.app}/${live.env} could not switch: ${message}`);
      await this.finish(owner, switchFailed(owner.release, message, Date.now()));
      return;
    }
    // In the same turn as the commit's in-memory switch: no scaling plan sees the new revision without its probes.
    const workers = [...owner.probes.keys()];
    for (const probe of owner.probes.values()) clearTimeout(probe.timer);
    for (const id of workers) this.probeOwners.delete(id);
    owner.probes.clear();
    this.options.runner()?.promote(workers);
    owner.release = live;
    this.active.delete(envKey(live.userId, live.app, live.env));
    this.options.log(`release ${live.id} of ${live.app}/${live.env} is live (build ${live.buildId.slice(0, 12)})`);
    owner.settle(live);
  }

  /** End a release that did not switch: its probes stop, its record is written. */
  private async finish(owner: Active, release: ReleaseRow): Promise<void> {
    owner.release = release;
    for (const probe of [...owner.probes.values()]) this.dropProbe(owner, probe);
    const key = envKey(release.userId, release.app, release.env);
    if (this.active.get(key) === owner) this.active.delete(key);
    await this.record(release);
    owner.settle(release);
  }

  private async record(release: ReleaseRow): Promise<void> {
    try {
      await this.options.write([{ op: "upsertRelease", release }]);
    } catch (err) {
      // The outcome still reaches the caller (settle); only the history misses this step.
      this.options.log(`release ${release.id}: its record could not be written: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
