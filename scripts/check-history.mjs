#!/usr/bin/env node
// The project speaks of what it is, never of how it was made: no tracked file refers to the numbered stretches of
// work that produced it ("session 12", "issue 34", "round 3", "sprint 2", "#41"). A figure is stated as it stands,
// with its machine and method; a decision and what it beat live in docs/design/ as a record, told without them.
//
// Usage: node scripts/check-history.mjs [repo root]   The tracked files of that git work tree (`git ls-files`),
// less package-lock.json and binary files. Exit 1 with one `file:line: text` line per reference on stderr.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Files never read: lock files (generated; their numbers are upstream versions), and this check with its test,
 * which must spell out what they refuse.
 */
const SKIPPED = [/(^|\/)package-lock\.json$/, /^scripts\/check-history\.mjs$/, /^test\/architecture\/history-check\.test\.ts$/];

/**
 * Each pattern names one way of citing a stretch of work by its number. A word followed by a number is enough:
 * "session" alone (a `svc dev` session, a browser's session storage), "issue" alone and "round" alone (a bench's
 * alternating rounds, "round trips") are ordinary words here and pass.
 */
export const PATTERNS = [
  { name: "session N", re: /\bsessions?\s+#?\d+/i },
  { name: "issue N", re: /\bissues?\s+#?\d+/i },
  { name: "round N", re: /\bround\s+#?\d+\b/i },
  { name: "sprint N", re: /\bsprints?\s+#?\d+/i },
  { name: "iteration N", re: /\b(?:iteration|milestone|phase|step)\s+#\d+/i },
  // "#41": a number after a hash that is not part of something else: not `owner/repo#41` (an upstream's
  // tracker), not `&#41;` (an entity), not a colour (`#155724`, `#fff`), not `#!` or a fragment of a URL.
  { name: "#N", re: /(?<![\w/&#.:?=-])#\d+\b(?![-\w])/ },
];

/** A colour written as hex digits, which `#N` would otherwise catch when its digits happen to be all decimal. */
const COLOUR = /#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})\b/g;
const COLOUR_CONTEXT = /(?:colou?r|background|border|fill|stroke|shadow|outline|--[\w-]+)\s*:|"#[0-9a-fA-F]{3,8}"|'#[0-9a-fA-F]{3,8}'/i;

/** The references to numbered stretches of work in one file's text: `{ line, text, pattern }`, in order. */
export function referencesIn(text) {
  const hits = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    if (COLOUR_CONTEXT.test(line)) line = line.replace(COLOUR, (c) => " ".repeat(c.length));
    for (const p of PATTERNS) {
      if (p.re.test(line)) {
        hits.push({ line: i + 1, text: lines[i].trim(), pattern: p.name });
        break;
      }
    }
  }
  return hits;
}

const isBinary = (buf) => buf.subarray(0, 8000).includes(0);

/** Every reference in the tracked files under `root`: `{ file, line, text, pattern }`. */
export function historyReferences(root, files = trackedFiles(root)) {
  const found = [];
  for (const file of files) {
    if (SKIPPED.some((re) => re.test(file))) continue;
    let buf;
    try {
      buf = readFileSync(join(root, file));
    } catch {
      continue; // listed but absent (deleted in the work tree, a submodule's folder)
    }
    if (isBinary(buf)) continue;
    for (const hit of referencesIn(buf.toString("utf8"))) found.push({ file, ...hit });
  }
  return found;
}

function trackedFiles(root) {
  const out = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return out.split("\0").filter(Boolean);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL("..", import.meta.url)));
  const hits = historyReferences(root);
  for (const h of hits) process.stderr.write(`${h.file}:${h.line}: ${h.text}\n`);
  if (hits.length > 0) {
    process.stderr.write(
      `${hits.length} reference(s) to numbered stretches of work (session, issue, round, sprint, #N). Say what is, and why; ` +
        "decisions and the figures that decided them go to docs/design/ without such numbers.\n",
    );
    process.exit(1);
  }
  process.stdout.write("no reference to numbered stretches of work in the tracked files\n");
}
