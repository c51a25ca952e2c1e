import { describe, expect, it } from "vitest";
import { buildProgram, withFlagName } from "./main.js";
import { namedCommand } from "./commands/index.js";

describe("service validation errors in CLI terms", () => {
  const flags = new Set(["--name", "--workers-min", "--gpu", "--execution-timeout", "--json"]);

  it("puts the flag that filled the field in front, keeping the field's path", () => {
    expect(withFlagName("$.workersMin: must be at least 0", flags)).toBe("--workers-min ($.workersMin): must be at least 0");
    expect(withFlagName("$.name: must not be empty", flags)).toBe("--name ($.name): must not be empty");
    // Fields whose flag has another name, and paths into a field.
    expect(withFlagName('$.gpuTypeIds[1]: unknown GPU type "X"', flags)).toBe('--gpu ($.gpuTypeIds[1]): unknown GPU type "X"');
    expect(withFlagName("$.executionTimeoutMs: must be a positive integer", flags)).toBe(
      "--execution-timeout ($.executionTimeoutMs): must be a positive integer",
    );
  });

  it("leaves errors alone when the command has no such flag, or the error names no field", () => {
    expect(withFlagName("$.size: must be at least 10", flags)).toBe("$.size: must be at least 10");
    expect(withFlagName("the body must be a JSON object", flags)).toBe("the body must be a JSON object");
  });
});

describe("svc --help", () => {
  it("lists the commands in groups, in the order a user meets them, each command once", async () => {
    const program = await buildProgram();
    const help = program.helpInformation();
    const headings = ["Start:", "Build and deploy:", "Operate:", "Manage:", "Help:"].map((h) => help.indexOf(`\n${h}\n`));
    expect(headings.every((at) => at > 0)).toBe(true);
    expect([...headings].sort((a, b) => a - b)).toEqual(headings);
    const groupOf = (name: string) => program.commands.find((c) => c.name() === name)?.helpGroup();
    expect(groupOf("init")).toBe("Start:");
    expect(groupOf("deploy")).toBe("Build and deploy:");
    expect(groupOf("run")).toBe("Operate:");
    expect(groupOf("volume")).toBe("Manage:");
    const names = program.commands.map((c) => c.name());
    expect(new Set(names).size).toBe(names.length);
  });
});

describe("svc <command>", () => {
  it("loads the module of the command it runs; help, completion and unknown words load every command", async () => {
    expect(namedCommand(["run", "hello", "--", "{}"])).toBe("run");
    expect(namedCommand(["--profile", "prod", "--debug", "volume", "list"])).toBe("volume");
    expect(namedCommand(["whoami"])).toBe("whoami");
    for (const whole of [[], ["--help"], ["help", "run"], ["completion", "bash"], ["__complete", "svc", "vo"], ["volum"], ["--", "run"]]) {
      expect(namedCommand(whole)).toBeUndefined();
    }
    const names = (program: { commands: ReadonlyArray<{ name(): string }> }) => program.commands.map((c) => c.name()).filter((n) => n !== "help");
    expect(names(await buildProgram(["run", "hello"]))).toEqual(["run"]);
    expect(names(await buildProgram(["logout"]))).toEqual(["login", "logout", "whoami"]);
    expect(names(await buildProgram(["volum"])).length).toBeGreaterThan(20);
  });
});
