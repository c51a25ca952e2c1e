// The console's only way to the service: its public HTTP API, with the signed-in key in the Authorization
// header. The key lives in sessionStorage (this tab, until it closes), never in a URL.

const KEY_STORAGE = "svc.console.key";

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function storeKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY_STORAGE);
  else sessionStorage.setItem(KEY_STORAGE, key);
}

/** An application/problem+json answer: {title, status, detail, errors?}. */
export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly errors: string[] = [],
  ) {
    super(detail || title);
  }
}

export interface ApiResult<T> {
  body: T;
  headers: Headers;
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();
/** Called when the service refuses the key (401): the console goes back to the sign-in form. */
export function onSignedOut(listener: Listener): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

async function problemOf(response: Response): Promise<ApiProblem> {
  const text = await response.text();
  try {
    const p = JSON.parse(text) as { title?: string; detail?: string; errors?: string[] };
    return new ApiProblem(response.status, p.title ?? response.statusText, p.detail ?? "", Array.isArray(p.errors) ? p.errors : []);
  } catch {
    return new ApiProblem(response.status, response.statusText, text.slice(0, 500));
  }
}

export async function request(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal; key?: string } = {}): Promise<Response> {
  const key = init.key ?? storedKey();
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
    cache: "no-store",
  });
  if (!response.ok) {
    const problem = await problemOf(response);
    if (response.status === 401 && init.key === undefined) for (const l of signedOutListeners) l();
    throw problem;
  }
  return response;
}

export async function api<T = unknown>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal; key?: string } = {}): Promise<T> {
  return (await apiWithHeaders<T>(path, init)).body;
}

export async function apiWithHeaders<T = unknown>(
  path: string,
  init: { method?: string; body?: unknown; signal?: AbortSignal; key?: string } = {},
): Promise<ApiResult<T>> {
  const response = await request(path, init);
  const text = await response.text();
  return { body: (text ? JSON.parse(text) : undefined) as T, headers: response.headers };
}

/**
 * The API's `$.field: message` errors by top-level field, for showing beside form fields; errors about no
 * single field (or `$`) go under "". Pure.
 */
export function fieldErrors(errors: string[]): Record<string, string[]> {
  const byField: Record<string, string[]> = {};
  for (const e of errors) {
    const m = /^\$\.([A-Za-z0-9_]+)[^:]*:\s*(.*)$/.exec(e);
    const field = m ? m[1]! : "";
    (byField[field] ??= []).push(m ? m[2]! : e);
  }
  return byField;
}

/** Read an NDJSON response line by line until it ends or the signal aborts. */
export async function readNdjson(response: Response, onLine: (value: unknown) => void, signal: AbortSignal): Promise<void> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  signal.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true });
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let newline: number;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (line) onLine(JSON.parse(line));
    }
  }
}

export const FINAL_STATES = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"]);
