// What the `svc` binary says, and the exit code it gives, when something is wrong: API errors carry a line
// saying what to do, a path in the way of `svc init`, an SVC_API_URL that is not an svc service, and help
// printed instead of running a command. Each runs the CLI (node bin/svc.js, or its entry point in the test's
// process) against real servers on 127.0.0.1.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliAgainstTestService } from "../cli-output.js";
import { createServer, type Server } from "node:http";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { ExitCode } from "../../src/errors.js";
import { call } from "../service/helpers.js";

const cli = cliAgainstTestService("svc-cli-errors-");
/**
 * The CLI's entry point in this process: what each command prints and its exit code, as the binary's. The binary
 * itself runs the 401 case and `svc` alone.
 */
const svc = (args: string[], extra: Record<string, string> = {}) => cli.inProcess(args, { CI: "true", ...extra });
const svcBinary = (args: string[], extra: Record<string, string> = {}) => cli.svc(args, { CI: "true", ...extra });

describe("updates with nothing to change", () => {
  it("are wrong usage (exit 2) before any request, naming where the settings are", async () => {
    for (const [command, help] of [
      [["volume", "update", "vol000000000000"], "svc volume update --help"],
      [["endpoint", "update", "0000000000000000"], "svc endpoint update --help"],
    ] as const) {
      const r = await svc([...command]);
      expect(r.code).toBe(ExitCode.usage);
      expect(r.stderr).toContain("Nothing to change: no setting flag was given");
      expect(r.stderr).toContain(help);
    }
  });
});

describe("API errors say what to do", () => {
  it("401 (a key the service does not know) points at SVC_API_KEY and the admin key", async () => {
    const r = await svcBinary(["volume", "list"], { SVC_API_KEY: "not-the-key" });
    expect(r.code).toBe(ExitCode.api);
    expect(r.stderr).toContain("error: the service answered 401 Unauthorized");
    expect(r.stderr).toContain("Check SVC_API_KEY (in the environment or a .env file)");
    expect(r.stderr).toContain("`svc server` prints where its admin key is");
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("403 (a key without the scope) says how to get a key with it", async () => {
    const reader = (await call(`${cli.t.service.url}/v1/keys`, { key: cli.t.key, body: { scopes: ["management:read"] } })).body;
    const r = await svc(["volume", "create", "--name", "n", "--size", "10"], { SVC_API_KEY: reader.key });
    expect(r.code).toBe(ExitCode.api);
    expect(r.stderr).toContain("403 Forbidden");
    expect(r.stderr).toContain("svc keys create --scope");
  });

  it("404 says to list what exists", async () => {
    const r = await svc(["volume", "get", "nosuchvolume"]);
    expect(r.code).toBe(ExitCode.api);
    expect(r.stderr).toContain("404 Not Found");
    expect(r.stderr).toContain("svc volume list");
  });
});

describe("svc init on a path that is not a directory", () => {
  it("a file as the project directory is a user error (exit 1)", async () => {
    const file = join(cli.cwd, "notes.txt");
    writeFileSync(file, "mine\n");
    const r = await svc(["init", file]);
    expect(r.code).toBe(ExitCode.user);
    expect(r.stderr).toContain(`error: Cannot create the project in ${file}: ${file} is a file, not a directory`);
    expect(r.stderr).not.toContain("internal error");
  });

  it("a file on the way (ENOTDIR) names that file", async () => {
    const file = join(cli.cwd, "plain");
    writeFileSync(file, "mine\n");
    const r = await svc(["init", join(file, "app")]);
    expect(r.code).toBe(ExitCode.user);
    expect(r.stderr).toContain(`${file} is a file, not a directory`);
  });

  it("a file where the template needs a directory (src) fails before writing anything", async () => {
    const dir = join(cli.cwd, "half");
    mkdirSync(dir);
    writeFileSync(join(dir, "src"), "mine\n");
    const r = await svc(["init", dir]);
    expect(r.code).toBe(ExitCode.user);
    expect(r.stderr).toContain(`${join(dir, "src")} is a file, not a directory`);
    expect(existsSync(join(dir, "package.json"))).toBe(false);
  });
});

describe("an SVC_API_URL that is not an svc service", () => {
  let html: Server;
  let htmlUrl: string;
  beforeAll(async () => {
    // What a wrong address often is: a web server answering HTML to everything.
    html = createServer((req, res) => {
      req.resume();
      res.writeHead(req.url?.startsWith("/v1/apps") ? 404 : 200, { "content-type": "text/html; charset=utf-8" });
      res.end("<!doctype html><html><body>Welcome</body></html>");
    });
    await new Promise<void>((resolve) => html.listen(0, "127.0.0.1", resolve));
    htmlUrl = `http://127.0.0.1:${(html.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => html.close(() => resolve())));

  it("a management command says the address answered but is not svc, with what it answered (exit 4)", async () => {
    const r = await svc(["volume", "list"], { SVC_API_URL: htmlUrl });
    expect(r.code).toBe(ExitCode.unreachable);
    expect(r.stderr).toContain(`error: ${htmlUrl} answered, but it is not an svc service (HTTP 200, text/html; charset=utf-8 from /v2/network-volumes)`);
    expect(r.stderr).toContain("Check SVC_API_URL");
    expect(r.stderr).not.toContain("Unexpected token");
    expect(r.stderr).not.toContain("internal error");
  });

  it("so does a deploy command (an HTML error page too)", async () => {
    const r = await svc(["app", "list"], { SVC_API_URL: htmlUrl });
    expect(r.code).toBe(ExitCode.unreachable);
    expect(r.stderr).toContain("not an svc service (HTTP 404, text/html; charset=utf-8 from /v1/apps)");
  });
});

describe("help printed instead of running a command", () => {
  it("is wrong usage (exit 2) for a command group without its subcommand and for help on an unknown command", async () => {
    const group = await svc(["volume"]);
    expect(group.code).toBe(ExitCode.usage);
    expect(group.stderr).toContain("Usage: svc volume");
    expect((await svc(["help", "nosuch"])).code).toBe(ExitCode.usage);
  });

  it("is success when asked for: svc alone, --help, help <command>", async () => {
    const bare = await svcBinary([]);
    expect(bare.code).toBe(0);
    expect(bare.stdout + bare.stderr).toContain("Usage: svc");
    expect((await svc(["--help"])).code).toBe(0);
    expect((await svc(["volume", "--help"])).code).toBe(0);
    expect((await svc(["help", "volume"])).code).toBe(0);
  });
});

describe("errors under --json", () => {
  /** stderr as the one JSON object `--json` promises: {"error": {...}}. */
  const errorOf = (stderr: string) =>
    (JSON.parse(stderr) as { error: { message: string; exitCode: number; hint?: string; status?: number; problems?: string[] } }).error;

  it("are one JSON object on stderr with the exit code the command gives without --json", async () => {
    const cases: Array<{ args: string[]; extra?: Record<string, string>; code: number; message: RegExp; status?: number }> = [
      { args: ["volume", "get", "nosuchvolume"], code: ExitCode.api, message: /answered 404 Not Found/, status: 404 },
      { args: ["volume", "list"], extra: { SVC_API_KEY: "not-the-key" }, code: ExitCode.api, message: /answered 401/, status: 401 },
      { args: ["volume", "update", "vol000000000000"], code: ExitCode.usage, message: /Nothing to change/ },
      { args: ["run"], code: ExitCode.usage, message: /missing required argument 'endpoint'/ },
      { args: ["volume", "list", "--no-such-flag"], code: ExitCode.usage, message: /unknown option '--no-such-flag'/ },
      { args: ["volume", "list"], extra: { SVC_API_URL: "http://127.0.0.1:9" }, code: ExitCode.unreachable, message: /127\.0\.0\.1:9/ },
    ];
    for (const c of cases) {
      const plain = await svc(c.args, c.extra);
      const json = await svc([...c.args, "--json"], c.extra);
      expect({ args: c.args, code: plain.code }).toEqual({ args: c.args, code: c.code });
      expect({ args: c.args, code: json.code }).toEqual({ args: c.args, code: c.code });
      expect(json.stdout).toBe("");
      const error = errorOf(json.stderr);
      expect(error.message).toMatch(c.message);
      expect(error.exitCode).toBe(c.code);
      if (c.status) expect(error.status).toBe(c.status);
      // The text a person reads says the same.
      expect(plain.stderr).toMatch(c.message);
    }
  });

  it("carry the hint and the service's listed faults, named by the flag", async () => {
    const bad = errorOf((await svc(["volume", "create", "--name", "", "--size", "1", "--json"])).stderr);
    expect([400, 422]).toContain(bad.status);
    expect(bad.problems?.join("\n")).toMatch(/--size|--name/);
    const missing = errorOf((await svc(["volume", "get", "nosuchvolume", "--json"])).stderr);
    expect(missing.hint).toContain("svc volume list");
  });
});
