// The pool of the load-balanced endpoints' workers (index.ts's LbRouter takes them for requests): which workers
// serve each endpoint and whether each is ready, by its /ping answers, and where the proxy reaches it (the address
// its driver gave or it registered, its local socket, its direct address once that answers). The pool follows the
// engine's worker registry through its events (`registered`, `addressed`, `gone`). Apart from the requests and
// their waits, which read its map and its workers as they are, with nothing between.

import type { JobEngine, WorkerEntry } from "../engine/index.js";
import { pingVerdict, probePing, type PingState } from "./ping.js";
import { LB_CREDENTIAL_HEADER } from "../../lb-credential.js";
import { parseAddress, type UpstreamAddress } from "./upstream.js";

/** /ping of a worker not yet ready is asked this often; of a ready one, every READY_PING_MS. */
const STARTING_PING_MS = 100;
const READY_PING_MS = 1000;
/** A ready worker leaves the pool after this many /ping failures in a row. */
const PING_FAILURES_OUT = 2;

/** A worker of the pool: its place, its credential, its /ping state and its requests in flight. */
export interface PoolWorker {
  id: string;
  endpointId: string;
  address: string;
  upstream: UpstreamAddress;
  /** The local socket the worker says it also serves on (used when its driver gave it that one). */
  claimedSocket: string | undefined;
  /**
   * What every request to it carries (lb-credential.ts): derived from the token it registered with. Undefined for
   * a prebuilt image's worker, which has no token and checks nothing.
   */
  credential: string | undefined;
  credentialLine: string;
  /** The credential as /ping's headers. */
  pingHeaders: Record<string, string> | undefined;
  /** A refusal of its credential (401/403 to /ping) already logged. */
  refusedSeen?: number;
  state: PingState | "new";
  inFlight: number;
  failures: number;
  nextProbe: number;
  probing: boolean;
}

/** A pool worker's credential fields: the value, its header line, its /ping headers. Pure. */
function credentialFields(credential: string | undefined): Pick<PoolWorker, "credential" | "credentialLine" | "pingHeaders"> {
  return credential === undefined
    ? { credential, credentialLine: "", pingHeaders: undefined }
    : { credential, credentialLine: `${LB_CREDENTIAL_HEADER}: ${credential}\r\n`, pingHeaders: { [LB_CREDENTIAL_HEADER]: credential } };
}

/** What the pool needs of the service: the engine (its worker registry, readiness, logs) and operator messages. */
export interface PoolDeps {
  engine: JobEngine;
  log(message: string): void;
}

/** A message about a worker of the pool: to the operator, and into its endpoint's logs. */
export function noteWorker(deps: PoolDeps, endpointId: string, workerId: string, text: string): void {
  deps.log(text);
  void deps.engine.appendLogs([{ ts: Date.now(), endpointId, workerId, jobId: null, stream: "log", text }]);
}

export class WorkerPool {
  readonly workers = new Map<string, PoolWorker>();
  /**
   * Direct addresses (a container's IP) a worker answered at: the proxy's choice, kept over a re-register. Where
   * a worker is reachable is the worker registry's (`WorkerEntry.reach`, `.serves`); which of those works is this.
   */
  private readonly directInUse = new Map<string, string>();
  /** Workers whose direct address was tried already (it is tried once). */
  private readonly directTried = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  /** `onReady`: a worker of that endpoint became ready (the requests waiting for one may be served). */
  constructor(
    private readonly deps: PoolDeps,
    private readonly onReady: (endpointId: string) => void,
  ) {
    this.timer = setInterval(() => this.probeDue(), STARTING_PING_MS);
    this.timer.unref();
    // The pool follows the worker registry: a worker joins when it registers a server, moves when its driver says
    // where it is, and leaves when it is gone.
    const events = deps.engine.workerEvents;
    events.on("registered", ({ worker }) => this.join(worker));
    events.on("addressed", ({ worker }) => {
      if (this.workers.has(worker.id)) this.join(worker);
    });
    events.on("gone", ({ worker }) => this.forget(worker.id));
  }

  /**
   * A worker that registered a server joins the pool (again: it may register twice, early and once its handler
   * loaded), at its driver's address where the driver gave one, else at the one it registered, with the local
   * socket it also serves on and its credential (`lbCredentialOfToken` of the token it registered with; none for
   * a prebuilt image's worker, which the service registers).
   *
   * The address its driver gave wins over the one it registers: a worker's word is used only where the driver
   * gave none (a Swarm task, a worker another replica started), and there the credential protects the others: a
   * worker that registers another's address has its requests (and /ping) go there with its own credential, which
   * that worker refuses, so it never gets traffic.
   */
  private join(entry: WorkerEntry): void {
    const serves = entry.serves;
    if (!serves) return;
    const workerId = entry.id;
    const address = this.directInUse.get(workerId) ?? entry.reach.address ?? serves.address;
    const known = this.workers.get(workerId);
    if (known && known.address === address) {
      known.claimedSocket = serves.socket;
      if (known.credential !== serves.credential) Object.assign(known, credentialFields(serves.credential));
      this.reach(known);
      return;
    }
    const w: PoolWorker = {
      id: workerId,
      endpointId: entry.endpointId,
      address,
      upstream: parseAddress(address),
      claimedSocket: serves.socket,
      ...credentialFields(serves.credential),
      state: "new",
      inFlight: 0,
      failures: 0,
      nextProbe: 0,
      probing: false,
    };
    this.workers.set(workerId, w);
    this.reach(w);
    const local = w.upstream.socketPath === undefined ? "" : ` (the proxy uses its local socket ${w.upstream.socketPath})`;
    noteWorker(this.deps, entry.endpointId, workerId, `lb: worker ${workerId} registered at ${address}${local}; checking /ping`);
    this.probeDue();
  }

  /** A worker is gone: out of the pool, and what the proxy learnt about reaching it forgotten. */
  private forget(workerId: string): void {
    this.workers.delete(workerId);
    this.directInUse.delete(workerId);
    this.directTried.delete(workerId);
  }

  /**
   * Where the proxy connects to `w` (`upstream`), from its address and its local socket. The socket only when the
   * worker serves there and its driver gave it that path: a worker's word alone never points the service at a
   * path of its choosing.
   */
  private reach(w: PoolWorker): void {
    const given = this.deps.engine.workers.get(w.id)?.reach.socket;
    const socketPath = w.claimedSocket !== undefined && given === w.claimedSocket ? w.claimedSocket : undefined;
    w.upstream = { ...parseAddress(w.address), socketPath };
  }

  /**
   * Once a worker answers /ping at its address, try its direct address (if its driver gave one), once; use it
   * from then on (traffic and /ping) only if it answers there too. A remote engine's or a VM's container IP does
   * not answer from here: the published port stays.
   */
  private tryDirect(w: PoolWorker): void {
    const direct = this.deps.engine.workers.get(w.id)?.reach.direct;
    if (direct === undefined || this.directTried.has(w.id)) return;
    this.directTried.add(w.id);
    void probePing(direct, 1000, w.pingHeaders).then((answer) => {
      if (this.closed || this.workers.get(w.id) !== w) return;
      // Only a /ping a worker gives (200 or 204) shows it is the same worker there.
      if (answer.state !== "ready" && answer.state !== "initializing") {
        noteWorker(this.deps, w.endpointId, w.id, `lb: worker ${w.id} does not answer at ${direct} from the service: the proxy keeps ${w.address}`);
        return;
      }
      const before = w.address;
      // In place (state and in-flight count kept), and kept over a re-register.
      this.directInUse.set(w.id, direct);
      w.address = direct;
      this.reach(w);
      noteWorker(this.deps, w.endpointId, w.id, `lb: worker ${w.id} answers at ${direct}: the proxy uses it instead of ${before}`);
    });
  }

  /** Whether `w` is still a worker of its endpoint in the engine's registry. */
  alive(w: PoolWorker): boolean {
    const entry = this.deps.engine.workers.get(w.id);
    return entry !== undefined && entry.endpointId === w.endpointId;
  }

  private probeDue(): void {
    if (this.closed) return;
    const now = Date.now();
    for (const w of [...this.workers.values()]) {
      if (!this.alive(w)) {
        this.forget(w.id);
        continue;
      }
      if (w.probing || w.nextProbe > now) continue;
      w.probing = true;
      void probePing(w.address, 1000, w.pingHeaders).then((answer) => {
        w.probing = false;
        w.nextProbe = Date.now() + (answer.state === "ready" ? READY_PING_MS : STARTING_PING_MS);
        this.heard(w, answer.state, answer.status);
      });
    }
  }

  private heard(w: PoolWorker, state: PingState, status: number | undefined): void {
    if (this.closed || this.workers.get(w.id) !== w) return;
    const before = w.state;
    if (state === "ready" || state === "initializing") this.tryDirect(w);
    if (state === "ready") {
      w.failures = 0;
      w.state = "ready";
      if (before !== "ready") {
        const standby = this.deps.engine.workers.get(w.id)?.standby === true;
        noteWorker(
          this.deps,
          w.endpointId,
          w.id,
          `lb: worker ${w.id} answered /ping 200: ready, ${standby ? "taking traffic once its release switches" : "taking traffic"}`,
        );
        // The one door of readiness: a release's probe has come up.
        this.deps.engine.workerReady(w.id, "ping");
        this.onReady(w.endpointId);
      }
      return;
    }
    if (state === "initializing" || state === "missing") {
      w.state = state;
      if (before !== state) {
        const text =
          state === "initializing" ? `lb: worker ${w.id} answered /ping 204: initializing` : `lb: ${pingVerdict(w.address, { state, status }).message}`;
        noteWorker(this.deps, w.endpointId, w.id, text);
      }
      return;
    }
    // unreachable or unhealthy: a ready worker gets a second chance before it leaves the pool
    w.failures++;
    if (before === "ready" && w.failures < PING_FAILURES_OUT) return;
    w.state = state;
    if (before === "ready")
      noteWorker(this.deps, w.endpointId, w.id, `lb: worker ${w.id} stopped answering /ping (${status ?? "no answer"}): taken out of the pool`);
    else if ((status === 401 || status === 403) && w.refusedSeen !== status) {
      // Said once: the worker listening there is another (this one registered an address not its own).
      w.refusedSeen = status;
      noteWorker(
        this.deps,
        w.endpointId,
        w.id,
        `lb: ${w.address} refused worker ${w.id}'s credential (/ping answered ${status}): the server there is not that worker; it gets no traffic`,
      );
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }
}
