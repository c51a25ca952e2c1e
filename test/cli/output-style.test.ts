// One output style for every command, seen as users see it: under a pseudo-terminal (`script` gives the command
// a real TTY) steps show a spinner and end with "✔ <step> (<time>)"; piped, each step is one plain line with no
// cursor codes. `svc build` and `svc deploy` (against a real service) print the same way.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliAgainstTestService, SVC_BIN } from "../cli-output.js";
import { cleanupTemps, copyFixture, requireCompiled } from "../build/harness.js";

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
    expect(output).toContain("\r\x1b[K");
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
