// Which replica on a shared database serves jobs. Its engine holds the queues and leases in memory and only it
// runs workers; it holds the "jobs" lease (cluster/leader.ts), with its address. The others pass job traffic to
// that address and keep trying the lease: when the holder is gone, one of them takes over (loads the jobs from
// the database and serves them).
//
// A jobs replica that cannot renew (the database does not answer) goes on serving: nobody else can take the
// lease while the database is down, and a single replica must survive an outage. Only when it learns that another
// replica holds the lease (a partition cut off this one alone) does it stop, since going on would run jobs twice.

import type { Queryable } from "../store/queryable.js";
import { createLeaderLease, leaseHolder, type LeaderLease, type LeaseHolder } from "./leader.js";
import { errorMessage, errorStack } from "../../errors.js";

export interface JobsRoleOptions {
  db: Queryable;
  /** This replica's name in the lease. */
  holder: string;
  /** Where the other replicas reach this one. */
  address: string;
  /** This replica adopts the jobs followers hand off, once it serves jobs (said with the lease). */
  adoptsHandoffs?: boolean;
  log(message: string): void;
  /** Another replica took the lease while this one served jobs: this one must stop. */
  onLost?(): void;
}

/** Taking over: load the jobs (before this replica answers job traffic), then start serving (workers). */
export interface TakeOver {
  load(): Promise<void>;
  start(): Promise<void>;
}

export class JobsRole {
  /**
   * The address of the replica serving jobs; undefined while this one does; null while another one does (or may)
   * but the database could not say at which address (it did not answer), so job traffic has nowhere to go.
   */
  private served: string | null | undefined = null;
  /** Whether the replica serving jobs (another one) adopts hand-offs, as its lease row last said. */
  private holderAdopts = false;
  private decided = false;
  private takeOver?: TakeOver;
  private takeOverPending = false;
  /** Said once per outage, not at every renewal attempt. */
  private failing = false;
  private readonly lease: LeaderLease;

  constructor(private readonly options: JobsRoleOptions) {
    this.lease = createLeaderLease({
      db: options.db,
      name: "jobs",
      holder: options.holder,
      address: options.address,
      adoptsHandoffs: options.adoptsHandoffs,
      onChange: (leading) => this.changed(leading),
      onHolder: (holder) => this.heldBy(holder),
      onError: (err) => {
        if (!this.failing) options.log(`could not renew this replica's lease to serve jobs: ${errorMessage(err)}`);
        this.failing = true;
      },
    });
  }

  /** Where job traffic goes: undefined when this replica serves it, null when the database could not say. */
  get servedBy(): string | null | undefined {
    return this.served;
  }

  /**
   * Whether the replica serving jobs adopts hand-offs (as of its lease row, read at each of this replica's attempts
   * to take the lease): an older svc during a rolling upgrade does not, and `/run` is then passed on to it.
   */
  get servedByAdopter(): boolean {
    return this.served === undefined || this.holderAdopts;
  }

  /** Take the lease or learn who holds it; the role from then on. */
  async start(): Promise<void> {
    await this.lease.start();
    this.decided = true;
    if (this.lease.leading) {
      this.served = undefined;
      return;
    }
    let holder: LeaseHolder | undefined;
    try {
      holder = await leaseHolder(this.options.db, "jobs");
    } catch (err) {
      // Not serving jobs and not knowing who does: job traffic is refused as the database being unreachable
      // (never sent to a made-up address) until a later lease attempt reads the holder (heldBy).
      this.served = null;
      this.options.log(
        `could not read which replica serves jobs (${errorMessage(err)}); job traffic that reaches this one is refused until the database answers`,
      );
      return;
    }
    this.served = holder?.address ?? null;
    this.holderAdopts = holder?.adoptsHandoffs ?? false;
    this.options.log(
      `jobs of this database are served by the replica at ${this.served ?? "an address the database does not name"}; job traffic that reaches this one goes there, and this one takes over if it goes away`,
    );
  }

  /** What taking over means (the service wired): a takeover that came before runs now. */
  ready(takeOver: TakeOver): void {
    this.takeOver = takeOver;
    if (this.takeOverPending) this.runTakeOver();
  }

  stop(): Promise<void> {
    return this.lease.stop();
  }

  private changed(leading: boolean): void {
    if (!this.decided) return;
    if (!leading) {
      if (this.served === undefined)
        this.options.log(
          "this replica could not renew its lease to serve jobs (the database does not answer); it goes on serving them unless another replica took over",
        );
      return;
    }
    this.failing = false;
    if (this.served === undefined) {
      this.options.log("this replica holds the lease to serve jobs again");
      return;
    }
    if (this.takeOver) this.runTakeOver();
    else this.takeOverPending = true;
  }

  private runTakeOver(): void {
    this.takeOverPending = false;
    const takeOver = this.takeOver!;
    void (async () => {
      await takeOver.load();
      this.served = undefined;
      this.options.log("this replica now serves the jobs of this database (the replica that did is gone)");
      await takeOver.start();
    })().catch((err: unknown) => this.options.log(`could not take over serving jobs: ${errorStack(err)}`));
  }

  private heldBy(holder: LeaseHolder | undefined): void {
    this.failing = false;
    if (!this.decided || !holder) return;
    this.holderAdopts = holder.adoptsHandoffs;
    if (this.served === undefined && holder.holder !== this.options.holder) {
      this.served = holder.address ?? null;
      this.options.log(`another replica (${holder.address ?? holder.holder}) took over serving jobs while this one could not reach the database`);
      this.options.onLost?.();
      return;
    }
    if (holder.address && this.served !== undefined) this.served = holder.address;
  }
}
