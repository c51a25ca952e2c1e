// Every command's --help, as a user reads it: examples after the flags, and each default said once, in units a
// person reads (1h, not 3600000).

import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { DEFAULT_SERVER_PORT } from "./commands/server.js";
import { buildProgram } from "./main.js";

/** Every runnable command under `cmd`, with its path ("volume create"). */
function everyCommand(cmd: Command, prefix: string[] = []): Array<{ path: string; cmd: Command }> {
  const here = prefix.length > 0 ? [{ path: prefix.join(" "), cmd }] : [];
  return [...here, ...cmd.commands.filter((c) => c.name() !== "help" && !c.name().startsWith("__")).flatMap((c) => everyCommand(c, [...prefix, c.name()]))];
}

/** What `svc <path> --help` prints, the text added after the flags included. */
function helpOf(cmd: Command): string {
  let text = "";
  for (let c: Command | null = cmd; c; c = c.parent) c.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

const commands = everyCommand(await buildProgram());

describe("svc <command> --help", () => {
  it("svc server's example says the port it listens on by default", () => {
    const server = commands.find((c) => c.path === "server")!.cmd;
    const example = helpOf(server)
      .split("\n")
      .find((l) => l.startsWith("  $ svc server ") && /127\.0\.0\.1:\d+/.test(l));
    expect(example).toContain(`127.0.0.1:${DEFAULT_SERVER_PORT} `);
  });

  it("covers the whole tree", () => {
    expect(commands.map((c) => c.path)).toEqual(expect.arrayContaining(["run", "deploy", "volume create", "jobs list", "endpoint webhook set", "doctor"]));
  });

  it.each(commands.map((c) => [c.path, c.cmd] as const))("svc %s --help shows examples that run svc", (path, cmd) => {
    const help = helpOf(cmd);
    expect(help).toMatch(/\nExamples:\n/);
    const examples = help
      .slice(help.indexOf("\nExamples:\n"))
      .split("\n")
      .filter((l) => l.startsWith("  $ "));
    expect(examples.length).toBeGreaterThan(0);
    // Each example runs this command (a group's examples run one of its subcommands).
    for (const line of examples) expect(line).toContain(`svc ${path}`);
  });

  it.each(commands.map((c) => [c.path, c.cmd] as const))("svc %s --help says each default once, in human units", (_path, cmd) => {
    for (const line of helpOf(cmd).split("\n")) {
      expect(line.match(/\bdefault\b/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
      // A duration in milliseconds or a byte count as a bare number is for programs, not people.
      if (!/--port/.test(line)) expect(line, line).not.toMatch(/\bdefault:? \d{4,}\b/);
    }
  });
});
