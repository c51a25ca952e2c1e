// The host's model cache as the service reports it (`GET /v1/models`, docs/models.md), and the pure helpers the
// Models page shows it with: each model as a row (its state in words, a fetch's progress, sizes, when last used),
// the cache's size against its limit, what to do about a failed fetch, and how often to ask again.

import type { ModelCacheAnswer, ModelFetchCode, ModelStatusAnswer } from "../src/service/http/answers.js";
import { api } from "./api.js";
import { relativeTime } from "./forms.js";

/** The cache as the service defines its answer (`GET /v1/models`). */
export type ModelCache = ModelCacheAnswer;
export type Model = ModelStatusAnswer;

export function loadModels(): Promise<ModelCache> {
  return api<ModelCache>("/v1/models");
}

/** While a model is fetched its progress moves: asked every 2 s; else every 10 s. */
export const FETCHING_POLL_MS = 2000;
export const IDLE_POLL_MS = 10_000;

const UNITS: Array<[number, string]> = [
  [1e12, "TB"],
  [1e9, "GB"],
  [1e6, "MB"],
  [1e3, "kB"],
];

/**
 * Bytes in the units the service's status lines use (powers of 1000, as the endpoint's `fetching model …` reason
 * and `svc doctor` say them): "548 MB", "1.2 GB", "900 kB", "12 B". Pure.
 */
export function formatBytes(bytes: number): string {
  for (const [size, unit] of UNITS) if (bytes >= size) return `${Number((bytes / size).toFixed(bytes >= 10 * size ? 0 : 1))} ${unit}`;
  return `${bytes} B`;
}

/** "120 of 548 MB (22%)": both in the total's unit, and the share done (100% only once every byte is there). Pure. */
export function progressText(done: number, total: number): string {
  const [scale, unit] = UNITS.find(([size]) => total >= size) ?? [1, "B"];
  const whole = (n: number) => Number((n / scale).toFixed(total >= 10 * scale ? 0 : 1));
  const percent = done >= total ? 100 : Math.min(99, Math.round((done * 100) / total));
  return `${whole(done)} of ${whole(total)} ${unit} (${percent}%)`;
}

/** A model's state in words: "ready", "fetching: 120 of 548 MB (22%)" ("fetching: looking it up" before its listing), "failed: <why>". Pure. */
export function stateText(m: Pick<Model, "state" | "doneBytes" | "totalBytes" | "error">): string {
  if (m.state === "ready") return "ready";
  if (m.state === "fetching") return m.totalBytes === undefined ? "fetching: looking it up" : `fetching: ${progressText(m.doneBytes ?? 0, m.totalBytes)}`;
  return `failed: ${m.error?.message ?? "no reason given"}`;
}

/** The cache's size against its limit: "1.2 GB of 10 GB", or "1.2 GB, no limit". Pure. */
export function usedText(usedBytes: number, limitBytes: number | null): string {
  return limitBytes === null ? `${formatBytes(usedBytes)}, no limit` : `${formatBytes(usedBytes)} of ${formatBytes(limitBytes)}`;
}

/**
 * What to do about a model that cannot be fetched: the advice `svc doctor` gives (src/doctor/checks.ts,
 * modelCacheFindings), so that both say the same. Pure.
 */
export function fetchAdvice(code: ModelFetchCode | undefined): string {
  if (code === "unauthorized") return "Give the service a token of the hub that may read it (SVC_MODEL_HUB_TOKEN).";
  if (code === "not_found") return "Check the model's name and revision on the hub (or the mirror SVC_MODEL_HUB names).";
  return "Check that the service reaches the hub (SVC_MODEL_HUB); it tries again by itself.";
}

/** A model as the page's table shows it. */
export interface ModelRow {
  model: string;
  state: Model["state"];
  stateText: string;
  /** A fetch's bar: bytes done of the total; no `value` while the total is not known yet (the bar moves without one). */
  progress?: { value?: number; max: number };
  /** The first 7 hex digits, as git shortens a commit; "—" before it is known. */
  commit: string;
  fullCommit?: string;
  /** A ready model's size, a fetch's total; "—" when not known. */
  size: string;
  /** "5 min ago", "just now"; "—" never (not yet in the cache). */
  lastUsed: string;
  /** The running or starting workers that use it. */
  workers: number;
  error?: { code: ModelFetchCode; message: string; advice: string };
}

const ORDER: Record<Model["state"], number> = { fetching: 0, failed: 1, ready: 2 };

/** The answer's models as rows: those being fetched first, then those that failed, then the ready ones; by name within each. Pure. */
export function modelRows(models: readonly Model[], now: number): ModelRow[] {
  return [...models]
    .sort((a, b) => ORDER[a.state] - ORDER[b.state] || a.model.localeCompare(b.model))
    .map((m) => {
      const total = m.state === "ready" ? m.bytes : m.state === "fetching" ? m.totalBytes : undefined;
      return {
        model: m.model,
        state: m.state,
        stateText: stateText(m),
        ...(m.state === "fetching"
          ? { progress: m.totalBytes === undefined ? { max: 1 } : { value: Math.min(m.doneBytes ?? 0, m.totalBytes), max: m.totalBytes } }
          : {}),
        commit: m.commit ? m.commit.slice(0, 7) : "—",
        ...(m.commit ? { fullCommit: m.commit } : {}),
        size: total === undefined ? "—" : formatBytes(total),
        lastUsed: m.lastUsed === undefined ? "—" : relativeTime(m.lastUsed, now),
        workers: m.inUse,
        ...(m.state === "failed" && m.error ? { error: { ...m.error, advice: fetchAdvice(m.error.code) } } : {}),
      };
    });
}

/** How long until the page asks again: soon while a fetch moves, else at ease. Pure. */
export function pollMs(cache: Pick<ModelCache, "models"> | null): number {
  return cache?.models.some((m) => m.state === "fetching") ? FETCHING_POLL_MS : IDLE_POLL_MS;
}
