// One output style for every command, seen as users see it: under a pseudo-terminal (`script` gives the command
// a real TTY) steps show a spinner and end with "✔ <step> (<time>)"; piped, each step is one plain line with no
// cursor codes. `svc build` and `svc deploy` (against a real service) print the same way.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliAgainstTestService, SVC_BIN } from "../cli-output.js";
import { cleanupTemps, copyFixture, requireCompiled } from "../build/harness.js";
import { runInPty } from "../pty.js";

beforeAll(requireCompiled);
afterAll(cleanupTemps);

const cli = cliAgainstTestService("svc-output-style-");

const quote = (arg: string) => `'${arg.replace(/'/g, "'\\''")}'`;

/** Run `svc args` under a pseudo-terminal (util-linux `script`); everything it wrote to the terminal. */
function underPty(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, SVC_BIN, ...args].map(quote).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d.toString()));
    child.stderr.on("data", (d) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

const STEP_DONE = (label: string) => new RegExp(`✔ ${label.replace(/[()]/g, "\\$&")} \\(\\d+(\\.\\d)? m?s\\)`);

describe("svc build", () => {
  it("on a terminal: a spinner per step, each ending with its time", async () => {
    const project = copyFixture("build-basic");
    const { code, output } = await underPty(["build", "-C", project], cli.env());
    expect(code).toBe(0);
    expect(output).toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] Discovering endpoints/);
    for (const label of ["Discovering endpoints", "Generating handlers", "Bundling 4 endpoint(s)", "Writing the manifest", "Packing the artifact"]) {
      expect(output).toMatch(STEP_DONE(label));
    }
    expect(output).toContain("Built build-basic: 4 endpoint(s)");
  });

  it("piped: one plain line per step, no cursor codes, the summary alone on stdout", async () => {
    const project = copyFixture("build-basic");
    const result = await cli.svc(["build", "-C", project]);
    expect(result.code).toBe(0);
    expect(result.stderr.split("\n").slice(0, 3)).toEqual(["Discovering endpoints...", "Generating handlers...", "Bundling 4 endpoint(s)..."]);
    expect(result.stderr).not.toMatch(/[\r\x1b✔]/);
    expect(result.stdout).toMatch(/^Built build-basic/);
  });
});

describe("svc deploy", () => {
  it("on a terminal: the same spinner steps with times as svc build, and an aligned plan", async () => {
    const project = copyFixture("deploy-app");
    const { code, output } = await underPty(["deploy", "--env", "style", "--dry-run", "-C", project], cli.env());
    expect(code).toBe(0);
    expect(output).toMatch(STEP_DONE("Discovering endpoints"));
    expect(output).toMatch(STEP_DONE("Packing the artifact"));
    // One row per endpoint, columns aligned: the state column starts at the same place on every row.
    const rows = output.split(/\r?\n/).filter((line) => /^ {2}\+ /.test(line));
    expect(rows.length).toBeGreaterThan(1);
    expect(new Set(rows.map((row) => row.indexOf("would be created"))).size).toBe(1);
  });

  it("piped: plain step lines, no cursor codes", async () => {
    const project = copyFixture("deploy-app");
    const result = await cli.svc(["deploy", "--env", "style", "--dry-run", "-C", project]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("Discovering endpoints...\n");
    expect(result.stderr).not.toMatch(/[\r\x1b✔]/);
  });
});

/**
 * What a terminal `columns` wide shows once `output` was written to it: its logical lines (rows a long line wrapped
 * onto joined again), trailing spaces trimmed. Applies what the CLI and ora write: text with automatic wrapping,
 * CR, LF, cursor up/down/left/right and to a column, erase in line and below; other sequences (colour, cursor
 * visibility, synchronized output) change nothing on the screen.
 */
function screenLines(output: string, columns: number): string[] {
  const rows: string[][] = [[]];
  const continues = new Set<number>();
  let row = 0;
  let col = 0;
  let pendingWrap = false;
  const at = (r: number) => {
    while (rows.length <= r) rows.push([]);
    return rows[r]!;
  };
  for (let i = 0; i < output.length; ) {
    const ch = output[i]!;
    if (ch === "\x1b") {
      const csi = /^\x1b\[([?0-9;]*)([A-Za-z])/.exec(output.slice(i, i + 24));
      if (!csi) {
        i += 2;
        continue;
      }
      i += csi[0].length;
      if (csi[1]!.startsWith("?")) continue;
      const n = Number(csi[1] || "0");
      pendingWrap = false;
      switch (csi[2]) {
        case "A":
          row = Math.max(0, row - Math.max(1, n));
          break;
        case "B":
          row += Math.max(1, n);
          break;
        case "C":
          col = Math.min(columns - 1, col + Math.max(1, n));
          break;
        case "D":
          col = Math.max(0, col - Math.max(1, n));
          break;
        case "G":
          col = Math.max(1, n) - 1;
          break;
        case "K":
          if (n === 0) at(row).length = Math.min(at(row).length, col);
          else if (n === 1) for (let c = 0; c <= col; c++) at(row)[c] = " ";
          else rows[row] = [];
          break;
        case "J":
          if (n === 0) {
            at(row).length = Math.min(at(row).length, col);
            rows.length = row + 1;
          }
          break;
      }
      continue;
    }
    if (ch === "\r") {
      col = 0;
      pendingWrap = false;
      i++;
      continue;
    }
    if (ch === "\n") {
      row++;
      at(row);
      pendingWrap = false;
      i++;
      continue;
    }
    const char = String.fromCodePoint(output.codePointAt(i)!);
    i += char.length;
    if (pendingWrap) {
      row++;
      col = 0;
      rows[row] = [];
      continues.add(row);
      pendingWrap = false;
    }
    const line = at(row);
    while (line.length < col) line.push(" ");
    line[col] = char;
    if (col === columns - 1) pendingWrap = true;
    else col++;
  }
  const lines: string[] = [];
  rows.forEach((cells, r) => {
    const text = cells.join("");
    if (continues.has(r) && lines.length > 0) lines[lines.length - 1] += text;
    else lines.push(text);
  });
  return lines.map((l) => l.trimEnd()).filter((l) => l !== "");
}

describe("spinners on a narrow terminal", () => {
  it("leave only the completed step lines on a 40-column terminal, however long a label wraps", async () => {
    const project = copyFixture("deploy-app");
    const { code, output } = await runInPty([process.execPath, SVC_BIN, "deploy", "--env", "narrow", "--detach", "-C", project], cli.env(), [], 120_000, 40);
    expect(code, output).toBe(0);
    const lines = screenLines(output, 40);
    // The upload's label (the artifact's path, its size, then its progress) is wider than the terminal.
    const upload = lines.find((l) => l.startsWith("✔ Uploading "));
    expect(upload, lines.join("\n")).toBeDefined();
    expect(upload!.length).toBeGreaterThan(40);
    // Nothing of a spinner is left: no frame, and every step's label shows once, as its completed line.
    expect(lines.filter((l) => /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/.test(l))).toEqual([]);
    for (const label of ["Discovering endpoints", "Packing the artifact", "Uploading ", "Provisioning "]) {
      const shown = lines.filter((l) => l.includes(label));
      expect(shown, lines.join("\n")).toHaveLength(1);
      expect(shown[0]).toMatch(/^✔ .* \(\d+(\.\d)? m?s\)$/);
    }
  });
});
