import { expect, it } from "vitest";
import { afterDeath, backoffMs, crashLoopMessage, crashLoopOf, DEFAULT_CRASH_LOOP, deathReason, NO_DEATHS, type EndpointDeaths } from "./crash-loop.js";

const kill = (at: number) => ({ at, reason: "sigkill" as const, text: "killed (SIGKILL: out of memory, or killed from outside)" });

it("doubles the wait before the next start with each death in a row, up to the cap", () => {
  expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(n))).toEqual([500, 1000, 2000, 4000, 8000, 16_000]);
  expect(backoffMs(40)).toBe(DEFAULT_CRASH_LOOP.backoffMaxMs);
  let s: EndpointDeaths = NO_DEATHS;
  for (let i = 0; i < 4; i++) s = afterDeath(s, kill(1000 * i), 200);
  expect(s.streak).toBe(4);
  expect(s.until).toBe(3000 + 4000);
});

it("is a crash loop from the third death within two minutes, and says so", () => {
  let s: EndpointDeaths = NO_DEATHS;
  s = afterDeath(s, kill(0), 100);
  s = afterDeath(s, kill(10_000), 100);
  expect(crashLoopOf(s, 10_000)).toBeUndefined();
  s = afterDeath(s, kill(20_000), 100);
  const loop = crashLoopOf(s, 20_000)!;
  expect(loop).toMatchObject({ deaths: 3, windowMs: 120_000, since: 0, lastDeath: { at: 20_000, reason: "sigkill" }, nextStartAt: 22_000 });
  expect(crashLoopMessage(loop, 20_000)).toBe(
    "workers keep dying: 3 in 2 min, last: killed (SIGKILL: out of memory, or killed from outside); next start in 2 s",
  );
  // Deaths older than the window stop counting.
  expect(crashLoopOf(s, 125_000)).toBeUndefined();
});

it("starts the count again after a worker that stayed up", () => {
  let s: EndpointDeaths = NO_DEATHS;
  for (let i = 0; i < 3; i++) s = afterDeath(s, kill(i), 100);
  s = afterDeath(s, kill(70_000), 65_000);
  expect(s.streak).toBe(1);
  expect(crashLoopOf(s, 70_000)).toBeUndefined();
});

it("names each death's reason for the metric", () => {
  expect(deathReason({ code: null, signal: "SIGKILL" })).toBe("sigkill");
  expect(deathReason({ code: 137, signal: null })).toBe("sigkill");
  expect(deathReason({ code: null, signal: "SIGSEGV" })).toBe("signal");
  expect(deathReason({ code: 1, signal: null })).toBe("exit_error");
  expect(deathReason({ code: 0, signal: null })).toBe("exit_zero");
  expect(deathReason(undefined)).toBe("start_failed");
});
