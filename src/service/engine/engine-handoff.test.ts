// The job engine over an in-memory store and a fake clock (engine-fixture.ts): jobs handed off by the replicas that
// follow, their adoption by the engine serving jobs, a follower's batched writes, and a caller waiting for one.

import { afterEach, describe, expect, it } from "vitest";
import { ADOPT_EVERY_MS, ANNOUNCE_EVERY_MS, HANDOFF_LINGER_MS, STREAM_GAP_MS } from "./handoff.js";
import type { JobRow } from "../store/types.js";
import { closeEngines, setup } from "./engine-fixture.js";

afterEach(closeEngines);

describe("the job engine's hand-off between replicas", () => {
  it("jobs handed off by other replicas are adopted once, and only by the engine serving jobs: one it holds already is not queued twice", async () => {
    const { engine, store, clock, w1, w2 } = setup();
    const submitted = { input: {}, sync: false };
    // Handed off before this engine loaded: the load finds it, and its mark is still there at the adoption.
    const early = await engine.handOff("e1", submitted, "follower");
    await engine.load([]);
    // Not serving jobs yet: nothing is adopted (a follower must leave the marks alone).
    expect(await engine.adoptHandedOff()).toBe(0);
    expect(store.handedOff.has(early.id)).toBe(true);
    const late = await engine.handOff("e1", submitted, "follower");
    expect(await engine.acceptHandoffs()).toBe(1);
    expect(engine.health("e1").jobs.inQueue).toBe(2);
    const taken = [...(await engine.take(w1, 1, 0)), ...(await engine.take(w2, 1, 0))];
    expect(taken.map((j) => j.id)).toEqual([early.id, late.id]);
    expect(engine.health("e1").jobs.inQueue).toBe(0);
    // Adoptions begin at most every ADOPT_EVERY_MS.
    const next = engine.adoptHandedOff();
    clock.advance(ADOPT_EVERY_MS);
    expect(await next).toBe(0);
  });

  it("after a follower's notice, jobs it hands off before it may send the next are adopted without one, and adopting stops once nothing comes", async () => {
    const { engine, clock } = setup();
    await engine.acceptHandoffs();
    const submitted = { input: {}, sync: false };
    /** Let the clock's timers and the batches they start run their course. */
    const step = async (ms: number) => {
      clock.advance(ms);
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };
    await step(ADOPT_EVERY_MS);
    await engine.handOff("e1", submitted, "follower");
    expect(await engine.adoptHandedOff({ announced: true })).toBe(1);
    // The follower's next notice may come only ANNOUNCE_EVERY_MS after the first: its next jobs come meanwhile,
    // after an adoption that found none...
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(1);
    await engine.handOff("e1", submitted, "follower");
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(2);
    // ...and while adoptions find some.
    await engine.handOff("e1", submitted, "follower");
    await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(3);
    // Nothing more for longer than the pause between notices: the engine stops looking...
    for (let t = 0; t < ANNOUNCE_EVERY_MS * 3; t += ADOPT_EVERY_MS) await step(ADOPT_EVERY_MS);
    await engine.handOff("e1", submitted, "follower");
    for (let t = 0; t < ANNOUNCE_EVERY_MS * 3; t += ADOPT_EVERY_MS) await step(ADOPT_EVERY_MS);
    expect(engine.health("e1").jobs.inQueue).toBe(3);
    // ...until the next notice (or rescan).
    expect(await engine.adoptHandedOff({ announced: true })).toBe(1);
    expect(engine.health("e1").jobs.inQueue).toBe(4);
  });

  it("a follower writes a lone submission at once, and under a steady stream waits for the callers of its last write", async () => {
    const { engine, store, clock } = setup();
    const writes: number[] = [];
    let release: (() => void) | undefined;
    const handOffJobs = store.handOffJobs.bind(store);
    store.handOffJobs = async (jobs: JobRow[]) => {
      writes.push(jobs.length);
      if (writes.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return handOffJobs(jobs);
    };
    const submitted = { input: {}, sync: false };
    const tick = () => new Promise((r) => setImmediate(r));
    const handOff = () => engine.handOff("e1", submitted, "follower");
    const first = handOff();
    await tick();
    // Written with no wait for company (the clock has not moved).
    expect(writes).toEqual([1]);
    // Two come while it is under way: with the one it answers, three callers were busy in this cycle.
    const second = [handOff(), handOff()];
    release!();
    await first;
    await tick();
    expect(writes).toEqual([1]);
    // The third comes back: the company is complete and the write goes at once, the clock still unmoved.
    second.push(handOff());
    await tick();
    expect(writes).toEqual([1, 3]);
    await Promise.all(second);
    // Of those three, two come back: the write waits for the third, at most HANDOFF_LINGER_MS.
    const third = [handOff(), handOff()];
    await tick();
    clock.advance(HANDOFF_LINGER_MS - 1);
    await tick();
    expect(writes).toEqual([1, 3]);
    clock.advance(1);
    await tick();
    expect(writes).toEqual([1, 3, 2]);
    await Promise.all(third);
    // One of those two comes back 5 ms later, as clients do on a loaded machine (2-6 ms): still the stream, so it
    // waits for the other.
    expect(STREAM_GAP_MS).toBeGreaterThan(5);
    clock.advance(5);
    const late = handOff();
    await tick();
    expect(writes).toEqual([1, 3, 2]);
    clock.advance(HANDOFF_LINGER_MS);
    await late;
    expect(writes).toEqual([1, 3, 2, 1]);
    // After a pause, a lone submission is written at once again.
    clock.advance(10 * HANDOFF_LINGER_MS);
    await handOff();
    expect(writes).toEqual([1, 3, 2, 1, 1]);
  });

  it("a caller waiting for a handed-off job hears of its end even when the job ran and ended while its first read was in flight", async () => {
    const { engine, store, clock, w1 } = setup();
    await engine.acceptHandoffs();
    // Another replica hands a job off; this engine has not adopted it yet.
    const row = (await engine.handOff("e1", { input: {}, sync: false }, "follower")) as JobRow;
    // The waiter's read of the store is slow: it answers with the job as it was when the read began.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const getJob = store.getJob.bind(store);
    store.getJob = async (id: string) => {
      const before = await getJob(id);
      if (id === row.id) await gate;
      return before;
    };
    const waiting = engine.waitFinal("e1", row.id, 60_000);
    // Meanwhile it is adopted, taken and completed.
    clock.advance(ADOPT_EVERY_MS);
    expect(await engine.adoptHandedOff()).toBe(1);
    const [taken] = await engine.take(w1, 1, 0);
    await engine.done(w1, [{ jobId: row.id, lease: taken!.lease!, status: "COMPLETED", output: { ok: true } }]);
    store.getJob = getJob;
    release();
    // Its read, back, asks for an adoption (the job looks queued and is not in memory); it may have to wait for
    // the one that follows the adoption above.
    for (let i = 0; i < 3; i++) {
      clock.advance(ADOPT_EVERY_MS);
      await new Promise((r) => setImmediate(r));
    }
    const answer = await Promise.race([waiting.then((r) => r?.status), new Promise((resolve) => setTimeout(() => resolve("still waiting"), 500))]);
    expect(answer).toBe("COMPLETED");
  });
});
