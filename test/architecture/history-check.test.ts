// The history check (scripts/check-history.mjs, run by `npm test`): the tree as it is passes; a file that cites a
// numbered stretch of work, committed in a throwaway git repository, fails the check with a `file:line: text` line;
// a clean file, colours, upstream trackers' references and ordinary uses of "session" and "round" pass.

import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain script, without type declarations
import { referencesIn } from "../../scripts/check-history.mjs";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = join(REPO, "scripts/check-history.mjs");

function check(root: string) {
  const run = spawnSync(process.execPath, [SCRIPT, root], { encoding: "utf8" });
  return { status: run.status, out: run.stdout, err: run.stderr };
}

const hits = (text: string) => (referencesIn(text) as Array<{ line: number; pattern: string }>).map((h) => `${h.line} ${h.pattern}`);

describe("the history check on a repository", () => {
  const repos: string[] = [];
  afterAll(() => repos.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  /** A git repository holding `files`, all tracked. */
  function repoWith(files: Record<string, string | Buffer>): string {
    const dir = mkdtempSync(join(tmpdir(), "svc-history-"));
    repos.push(dir);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), content);
    }
    execFileSync("git", ["init", "-q"], { cwd: dir });
    execFileSync("git", ["add", "-A"], { cwd: dir });
    return dir;
  }

  it("passes on the tree as it is", () => {
    const { status, out, err } = check(REPO);
    expect(err).toBe("");
    expect(status).toBe(0);
    expect(out).toMatch(/no reference to numbered stretches of work/);
  });

  it("passes a clean repository", () => {
    const root = repoWith({
      "docs/guide.md": "# Guide\n\nRun `svc dev`: the session's endpoints answer at once. Three round trips take 0.7 ms.\n",
      "src/a.ts": '// Upstream bug: nodejs/node#65446, worked around below.\nexport const colour = "#155724";\n',
      "console/style.css": ":root { --ok-fg: #155724; --bg: #fff; }\n",
    });
    const { status, err } = check(root);
    expect(err).toBe("");
    expect(status).toBe(0);
  });

  it("fails on a planted reference, naming the file, the line and its text", () => {
    const root = repoWith({
      "docs/guide.md": "# Guide\n\nWhat it does.\nMeasured in session 12: 0.9x.\n",
      "src/b.ts": "export const x = 1; // see #41\n",
      "test/c.test.ts": "// As issue 34 asks.\n",
    });
    const { status, err } = check(root);
    expect(status).toBe(1);
    expect(err).toContain("docs/guide.md:4: Measured in session 12: 0.9x.");
    expect(err).toContain("src/b.ts:1: export const x = 1; // see #41");
    expect(err).toContain("test/c.test.ts:1: // As issue 34 asks.");
  });

  it("reads tracked files only, and skips package-lock.json and binary files", () => {
    const root = repoWith({
      "package-lock.json": '{ "note": "session 3" }\n',
      "img.bin": Buffer.from([0, 1, 2, ...Buffer.from("session 4")]),
      "ok.md": "fine\n",
    });
    writeFileSync(join(root, "untracked.md"), "round 3\n");
    expect(check(root).status).toBe(0);
  });
});

describe("the history patterns", () => {
  it("catch each way of citing a stretch of work", () => {
    expect(hits("Session 5: met.")).toEqual(["1 session N"]);
    expect(hits("a\nin sessions 2-4")).toEqual(["2 session N"]);
    expect(hits("issue #37's rule")).toEqual(["1 issue N"]);
    expect(hits("Tried in round 3")).toEqual(["1 round N"]);
    expect(hits("sprint 2 plan")).toEqual(["1 sprint N"]);
    expect(hits("fixed by #123.")).toEqual(["1 #N"]);
    expect(hits("(#41)")).toEqual(["1 #N"]);
  });

  it("leave ordinary words, measurements, colours, anchors and upstream references alone", () => {
    expect(
      hits(
        [
          "the svc dev session's key; session storage",
          "rounds 2-4 of 10; the rounds' medians",
          "three round trips; the first round is not counted",
          "an issue with the driver",
          'color: #155724; fill: "#222"',
          "see [the section](#limits) and nodejs/node#65446",
          "&#41; and #!/usr/bin/env node",
          "http://host/page#12",
        ].join("\n"),
      ),
    ).toEqual([]);
  });
});
