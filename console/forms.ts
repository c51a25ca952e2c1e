// Pure helpers of the console's forms (tested in test/console/forms.test.ts).

/** `KEY=value` lines to an env map, and back. Pure. */
export function parseEnv(text: string): { env: Record<string, string>; bad: string[] } {
  const env: Record<string, string> = {};
  const bad: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) bad.push(line);
    else env[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return { env, bad };
}

export function envText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n");
}

/** The scopes of the form: the ticked ones plus `jobs:<id>` for each endpoint id typed. Pure. */
export function scopesOf(ticked: string[], endpointIds: string): string[] {
  const perEndpoint = endpointIds
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean)
    .map((id) => `jobs:${id}`);
  return [...ticked, ...perEndpoint];
}

/** How long ago (or until) `t`, in words: "just now", "5 min ago", "in 7 days". Pure. */
export function relativeTime(t: number, now: number): string {
  const diff = t - now;
  const abs = Math.abs(diff);
  if (abs < 45_000) return "just now";
  const units: Array<[number, string]> = [
    [86_400_000, "day"],
    [3_600_000, "h"],
    [60_000, "min"],
  ];
  const [size, unit] = units.find(([ms]) => abs >= ms) ?? [60_000, "min"];
  const n = Math.round(abs / size);
  const text = unit === "day" ? `${n} day${n === 1 ? "" : "s"}` : `${n} ${unit}`;
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

/** A function "Try it" can call, as the environments API lists it. */
export interface CallableFunction {
  name: string;
  kind: string;
  class?: string;
  exampleInput?: unknown;
}

/**
 * The request body "Try it" starts from: the function's example input (from its TypeScript type; `{}` without
 * one), and `function` when the endpoint serves more than one (the job API needs it then). Pure.
 */
export function exampleBody(functions: readonly CallableFunction[], chosen: string | undefined): string {
  const fn = functions.find((f) => f.name === chosen) ?? functions[0];
  const body: Record<string, unknown> = { input: fn?.exampleInput ?? {} };
  if (fn && functions.length > 1) body.function = fn.name;
  return JSON.stringify(body, null, 2);
}

/** Key lifetimes the keys page offers, in seconds (`expiresInSeconds`); "" never expires. */
export const KEY_EXPIRIES: ReadonlyArray<{ label: string; seconds: number | "" }> = [
  { label: "Never", seconds: "" },
  { label: "1 day", seconds: 86_400 },
  { label: "7 days", seconds: 7 * 86_400 },
  { label: "30 days", seconds: 30 * 86_400 },
  { label: "90 days", seconds: 90 * 86_400 },
];
