// Shared by `svc volume|endpoint|template|keys`: one call to the management API of the target service, flag
// parsers, and a plain table for people. Problems from the API become ApiError (status, detail, `errors`).

import { UsageError } from "../errors.js";
import { readJson } from "svc/internal";
import { apiFetch, serviceTarget } from "./target.js";
import { alignTable } from "./output.js";

export async function management<T>(method: string, path: string, body?: unknown): Promise<T> {
  const target = serviceTarget();
  const response = await apiFetch(target, path, {
    method,
    headers: body === undefined ? undefined : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return readJson<T>(response);
}

export function intFlag(name: string) {
  return (value: string): number => {
    if (!/^-?\d+$/.test(value)) throw new UsageError(`${name} must be an integer, not "${value}"`);
    return Number(value);
  };
}

/** Repeatable `--env KEY=VALUE`. */
export function envFlag(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = value.indexOf("=");
  if (at <= 0) throw new UsageError(`--env takes KEY=VALUE, not "${value}"`);
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

export function listFlag(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

/** Only the flags the user gave (undefined ones are left out of a request body). */
export function defined(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
}

/** An update's body: the flags given; none at all is wrong usage (not a no-op that succeeds). */
export function changes(values: Record<string, unknown>, command: string): Record<string, unknown> {
  const given = defined(values);
  if (Object.keys(given).length === 0)
    throw new UsageError("Nothing to change: no setting flag was given", `See \`${command} --help\` for the settings it changes.`);
  return given;
}

/** A record's field as a column's header: its words (`dataCenter` → `DATA CENTER`, `userId` → `USER ID`). Pure. */
export function columnHeader(field: string): string {
  return field.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
}

export function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cell = (v: unknown) => (v === null || v === undefined ? "-" : Array.isArray(v) ? v.join(",") : String(v));
  return alignTable(
    columns.map(columnHeader),
    rows.map((r) => columns.map((c) => cell(r[c]))),
  );
}

export function fields(record: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  return Object.entries(record)
    .map(
      ([k, v]) =>
        `${k.padEnd(width)}  ${v !== null && typeof v === "object" && !Array.isArray(v) ? JSON.stringify(v) : Array.isArray(v) ? v.join(", ") : String(v)}`,
    )
    .join("\n");
}
