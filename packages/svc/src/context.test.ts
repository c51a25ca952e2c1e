import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readDotEnv } from "./context.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** What svc reads from a project whose `.env` holds `text` (a fresh directory each: the reading is cached). */
function dotEnv(text: string): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "svc-dotenv-"));
  dirs.push(dir);
  writeFileSync(join(dir, ".env"), text);
  return readDotEnv(dir);
}

describe(".env as svc reads it", () => {
  it("leaves an inline comment out of the value", () => {
    expect(dotEnv("SVC_ENV=prod  # production\n")).toEqual({ SVC_ENV: "prod" });
  });

  it("keeps a # inside quotes", () => {
    expect(dotEnv(`A="a # b"\nB='c # d'\n`)).toEqual({ A: "a # b", B: "c # d" });
  });

  it("unquotes single, double and backtick quotes; only double quotes turn \\n into a line break", () => {
    expect(dotEnv('S=\'one\\ntwo\'\nD="one\\ntwo"\nT=`it\'s "quoted"`\n')).toEqual({ S: "one\\ntwo", D: "one\ntwo", T: `it's "quoted"` });
  });

  it("reads a double-quoted value over several lines", () => {
    expect(dotEnv('KEY="-----BEGIN-----\nabc\n-----END-----"\nNEXT=1\n')).toEqual({ KEY: "-----BEGIN-----\nabc\n-----END-----", NEXT: "1" });
  });

  it("accepts the `export ` prefix of shell files", () => {
    expect(dotEnv("export SVC_APP=shop\n")).toEqual({ SVC_APP: "shop" });
  });

  it("reads empty values as empty strings", () => {
    expect(dotEnv('EMPTY=\nQUOTED=""\n')).toEqual({ EMPTY: "", QUOTED: "" });
  });

  it("reads CRLF line ends without a carriage return in the values", () => {
    expect(dotEnv('A=1\r\nB=two words\r\nC="q"\r\n')).toEqual({ A: "1", B: "two words", C: "q" });
  });

  it("lets the last of a repeated key win", () => {
    expect(dotEnv("SVC_ENV=staging\nSVC_ENV=prod\n")).toEqual({ SVC_ENV: "prod" });
  });

  it("skips comment lines and blank lines, and trims unquoted values", () => {
    expect(dotEnv("# a comment\n\n  A =  spaced  \n")).toEqual({ A: "spaced" });
  });

  it("is empty without a .env file", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-dotenv-"));
    dirs.push(dir);
    expect(readDotEnv(dir)).toEqual({});
  });
});
