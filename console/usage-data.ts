// The Usage page's numbers (`GET /v1/usage`): the route's hourly rows added up per endpoint, and seconds in units a
// person reads. Pure, apart from `loadUsage`.

import type { UsageAnswer, UsageHourAnswer } from "../src/service/http/answers.js";
import { api } from "./api.js";

/** `GET /v1/usage`'s answer, as the service defines it. */
export type UsageHour = UsageHourAnswer;
export type Usage = UsageAnswer;

export type UsageWindow = "24h" | "7d";

export const USAGE_WINDOWS: ReadonlyArray<{ key: UsageWindow; label: string; ms: number }> = [
  { key: "24h", label: "Last 24 hours", ms: 24 * 3_600_000 },
  { key: "7d", label: "Last 7 days", ms: 7 * 24 * 3_600_000 },
];

/** The caller's usage over the window ending now (the operator's key: every user's). */
export async function loadUsage(window: UsageWindow, now = Date.now()): Promise<Usage> {
  const span = USAGE_WINDOWS.find((w) => w.key === window)!.ms;
  return api<Usage>(`/v1/usage?from=${now - span}&to=${now}`);
}

export interface EndpointUsage {
  endpointId: string;
  userId: string;
  workerSeconds: number;
  gpuSeconds: number;
  /** GPU-seconds per GPU type, types with none left out. */
  gpuSecondsByType: Record<string, number>;
  jobs: number;
  /** A load-balanced endpoint's requests. */
  requests: number;
}

/** The hourly rows added up per endpoint (and user), most worker-seconds first. Pure. */
export function totalsByEndpoint(hours: readonly UsageHour[]): EndpointUsage[] {
  const by = new Map<string, EndpointUsage>();
  for (const h of hours) {
    const key = `${h.userId}\u0000${h.endpointId}`;
    let e = by.get(key);
    if (!e) by.set(key, (e = { endpointId: h.endpointId, userId: h.userId, workerSeconds: 0, gpuSeconds: 0, gpuSecondsByType: {}, jobs: 0, requests: 0 }));
    e.workerSeconds += h.workerSeconds;
    e.gpuSeconds += h.gpuSeconds;
    e.jobs += h.jobs;
    e.requests += h.requests;
    if (h.gpuType !== null && h.gpuSeconds > 0) e.gpuSecondsByType[h.gpuType] = (e.gpuSecondsByType[h.gpuType] ?? 0) + h.gpuSeconds;
  }
  return [...by.values()].sort((a, b) => b.workerSeconds - a.workerSeconds || a.endpointId.localeCompare(b.endpointId));
}

/** The hourly rows newest first (the route gives them oldest first). Pure. */
export function hoursNewestFirst(hours: readonly UsageHour[]): UsageHour[] {
  return [...hours].sort((a, b) => b.hour.localeCompare(a.hour) || a.userId.localeCompare(b.userId) || a.endpointId.localeCompare(b.endpointId));
}

/** Seconds as a person reads them: "0 s", "12.3 s", "4 min 05 s", "2 h 03 min". Pure. */
export function formatSeconds(seconds: number): string {
  const tenths = Math.round(seconds * 10) / 10;
  if (tenths < 60) return `${tenths} s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
  const minutes = Math.round(whole / 60);
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

/** GPU-seconds by type as "ADA_80_PRO 4 min 05 s, HOPPER_141 12.0 s" ("—": none). Pure. */
export function formatByType(byType: Record<string, number>): string {
  const entries = Object.entries(byType).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0 ? "—" : entries.map(([t, s]) => `${t} ${formatSeconds(s)}`).join(", ");
}
