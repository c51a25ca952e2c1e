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

/** What "Try it" sends when the function's input has no type to start from. */
export const UNTYPED_EXAMPLE_INPUT = { prompt: "Hello! Say something nice in one sentence." };

// Words a field's name may hold, and a value a handler would expect there (an empty string runs, and answers nothing).
const SAMPLE_TEXT: Array<[RegExp, string]> = [
  [/prompt|question|query|instruction/i, "Hello! Say something nice in one sentence."],
  [/message|text|content|body|input/i, "Hello from the svc console"],
  [/url|uri|link|href/i, "https://example.com"],
  [/email/i, "ada@example.com"],
  [/name|user|author/i, "Ada"],
  [/lang|locale/i, "en"],
  [/model/i, "default"],
  [/id$/i, "example-1"],
];

/**
 * An example input with something in it: the build derives one from the input's TypeScript type, with "" for
 * strings and 0 for numbers; a handler given `{"prompt": ""}` runs and answers nothing. Strings get a value
 * fitting the field's name, zero numbers become 1, arrays of nothing get one element. Pure.
 */
export function sensibleExample(value: unknown, key = ""): unknown {
  if (value === "") return SAMPLE_TEXT.find(([re]) => re.test(key))?.[1] ?? "example";
  if (value === 0) return 1;
  if (Array.isArray(value)) return value.map((v) => sensibleExample(v, key));
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, sensibleExample(v, k)]));
  return value;
}

/** The input "Try it" and the curl start from: the function's example input made sensible, or a prompt. Pure. */
export function exampleInput(fn: CallableFunction | undefined): unknown {
  const example = fn?.exampleInput;
  const empty = example === undefined || example === null || (typeof example === "object" && !Array.isArray(example) && Object.keys(example).length === 0);
  return empty ? UNTYPED_EXAMPLE_INPUT : sensibleExample(example);
}

/**
 * The request body "Try it" starts from: the function's example input (from its TypeScript type, made sensible;
 * a prompt without one), and `function` when the endpoint serves more than one (the job API needs it then). Pure.
 */
export function exampleBody(functions: readonly CallableFunction[], chosen: string | undefined, indent = 2): string {
  const fn = functions.find((f) => f.name === chosen) ?? functions[0];
  const body: Record<string, unknown> = { input: exampleInput(fn) };
  if (fn && functions.length > 1) body.function = fn.name;
  return JSON.stringify(body, null, indent);
}

/** The placeholder the CLI's printed curls use for the API key (`svc deploy`, docs/cli.md). */
export const API_KEY_PLACEHOLDER = "$SVC_API_KEY";

/** A shell word in single quotes (a ' inside closes, escapes and reopens). Pure. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * A ready-to-paste curl for an endpoint: a queue endpoint's /runsync with the example body, or a load-balanced
 * one's first GET route (else its first route). The key is the CLI's placeholder, never the signed-in key. Pure.
 */
export function endpointCurl(endpoint: { type: "queue" | "lb"; url: string; functions?: readonly CallableFunction[]; routes?: readonly string[] }): string {
  const auth = `-H "Authorization: Bearer ${API_KEY_PLACEHOLDER}"`;
  if (endpoint.type === "lb") {
    const routes = endpoint.routes ?? [];
    const route = routes.find((r) => r.startsWith("GET ")) ?? routes[0] ?? "GET /ping";
    const [method, path] = route.split(" ") as [string, string];
    const concrete = path.replace(/:([A-Za-z0-9_]+)/g, "1");
    const body = method === "GET" || method === "HEAD" || method === "DELETE" ? "" : ` -H "Content-Type: application/json" -d '{}'`;
    return `curl -s -X ${method} ${endpoint.url}${concrete} ${auth}${body}`;
  }
  return `curl -s -X POST ${endpoint.url}/runsync ${auth} -H "Content-Type: application/json" -d ${shellQuote(exampleBody(endpoint.functions ?? [], undefined, 0))}`;
}

/** Key lifetimes the keys page offers, in seconds (`expiresInSeconds`); "" never expires. */
export const KEY_EXPIRIES: ReadonlyArray<{ label: string; seconds: number | "" }> = [
  { label: "Never", seconds: "" },
  { label: "1 day", seconds: 86_400 },
  { label: "7 days", seconds: 7 * 86_400 },
  { label: "30 days", seconds: 30 * 86_400 },
  { label: "90 days", seconds: 90 * 86_400 },
];
