// The console's pure model cache helpers: states and sizes in words, the cache against its limit, the rows in
// the order a user looks for them, what to do about a failed fetch, and how often the page asks again.

import { expect, it } from "vitest";
import { fetchAdvice, formatBytes, modelRows, pollMs, progressText, stateText, usedText, type Model } from "./models-data.js";

const NOW = Date.UTC(2026, 10, 24, 12, 0, 0);
const COMMIT = "8b3219a92973c328a8e22fadcfa821b5dc75636a";

it("says sizes in the service's units, and a fetch's progress in its total's unit with the share done", () => {
  expect([0, 12, 900_000, 548_000_000, 1_234_000_000, 10e9, 2.5e12].map(formatBytes)).toEqual(["0 B", "12 B", "900 kB", "548 MB", "1.2 GB", "10 GB", "2.5 TB"]);
  expect(progressText(120e6, 548e6)).toBe("120 of 548 MB (22%)");
  expect(progressText(1.5e9, 4.2e9)).toBe("1.5 of 4.2 GB (36%)");
  // 100% only once every byte is there.
  expect(progressText(547_999_999, 548e6)).toBe("548 of 548 MB (99%)");
  expect(progressText(548e6, 548e6)).toBe("548 of 548 MB (100%)");
  expect(progressText(0, 0)).toBe("0 of 0 B (100%)");
});

it("words each state: ready, a fetch with its progress (or still looking it up), a failure with its reason", () => {
  expect(stateText({ state: "ready" })).toBe("ready");
  expect(stateText({ state: "fetching", doneBytes: 120e6, totalBytes: 548e6 })).toBe("fetching: 120 of 548 MB (22%)");
  expect(stateText({ state: "fetching", doneBytes: 0 })).toBe("fetching: looking it up");
  expect(stateText({ state: "failed", error: { code: "not_found", message: "the hub has no revision acme/x@nope (404)" } })).toBe(
    "failed: the hub has no revision acme/x@nope (404)",
  );
});

it("says the cache's size against its limit, or that it has none", () => {
  expect(usedText(1.2e9, 10e9)).toBe("1.2 GB of 10 GB");
  expect(usedText(0, 500 * 1024 ** 2)).toBe("0 B of 524 MB");
  expect(usedText(1.2e9, null)).toBe("1.2 GB, no limit");
});

it("gives svc doctor's advice for each failure", () => {
  expect(fetchAdvice("unauthorized")).toBe("Give the service a token of the hub that may read it (SVC_MODEL_HUB_TOKEN).");
  expect(fetchAdvice("not_found")).toBe("Check the model's name and revision on the hub (or the mirror SVC_MODEL_HUB names).");
  for (const code of ["hub_unreachable", "hub_error", "hash_mismatch", undefined] as const)
    expect(fetchAdvice(code)).toBe("Check that the service reaches the hub (SVC_MODEL_HUB); it tries again by itself.");
});

it("lists fetches first, then failures, then ready models, by name within each; each row as the table shows it", () => {
  const models: Model[] = [
    { model: "acme/b@main", state: "ready", commit: COMMIT, bytes: 548e6, lastUsed: NOW - 5 * 60_000, inUse: 2 },
    { model: "acme/a@main", state: "ready", commit: COMMIT, bytes: 1.2e9, lastUsed: NOW - 10_000, inUse: 0 },
    { model: "acme/z@main", state: "fetching", doneBytes: 120e6, totalBytes: 548e6, inUse: 0 },
    { model: "acme/y@v1", state: "failed", doneBytes: 0, inUse: 0, error: { code: "unauthorized", message: "the hub refused the revision acme/y@v1 (401)" } },
    { model: "acme/c@main", state: "fetching", doneBytes: 0, inUse: 0 },
  ];
  const rows = modelRows(models, NOW);
  expect(rows.map((r) => r.model)).toEqual(["acme/c@main", "acme/z@main", "acme/y@v1", "acme/a@main", "acme/b@main"]);
  expect(rows[0]).toEqual({
    model: "acme/c@main",
    state: "fetching",
    stateText: "fetching: looking it up",
    progress: { max: 1 },
    commit: "—",
    size: "—",
    lastUsed: "—",
    workers: 0,
  });
  expect(rows[1]).toMatchObject({ stateText: "fetching: 120 of 548 MB (22%)", progress: { value: 120e6, max: 548e6 }, size: "548 MB" });
  expect(rows[2]).toEqual({
    model: "acme/y@v1",
    state: "failed",
    stateText: "failed: the hub refused the revision acme/y@v1 (401)",
    commit: "—",
    size: "—",
    lastUsed: "—",
    workers: 0,
    error: {
      code: "unauthorized",
      message: "the hub refused the revision acme/y@v1 (401)",
      advice: "Give the service a token of the hub that may read it (SVC_MODEL_HUB_TOKEN).",
    },
  });
  expect(rows[3]).toEqual({
    model: "acme/a@main",
    state: "ready",
    stateText: "ready",
    commit: "8b3219a",
    fullCommit: COMMIT,
    size: "1.2 GB",
    lastUsed: "just now",
    workers: 0,
  });
  expect(rows[4]).toMatchObject({ size: "548 MB", lastUsed: "5 min ago", workers: 2 });
});

it("asks again every 2 s while a model is fetched, else every 10 s", () => {
  expect(pollMs(null)).toBe(10_000);
  expect(pollMs({ models: [] })).toBe(10_000);
  expect(pollMs({ models: [{ model: "a/b@main", state: "ready", inUse: 0 }] })).toBe(10_000);
  expect(pollMs({ models: [{ model: "a/b@main", state: "failed", inUse: 0 }] })).toBe(10_000);
  expect(
    pollMs({
      models: [
        { model: "a/b@main", state: "ready", inUse: 0 },
        { model: "a/c@main", state: "fetching", inUse: 0 },
      ],
    }),
  ).toBe(2000);
});
