// Every command registers itself here; one file per command. A command's module (and what it imports) loads only
// when the command line names it, or when the whole tree is wanted (help, completion, a word that names no
// command): `svc run` does not load the build, the deploy client or the service's settings.
import type { Command } from "commander";

export type RegisterCommand = (program: Command) => void;

/** A command's module: the names it registers at the top level, and how to load it. */
interface CommandModule {
  names: readonly string[];
  load(): Promise<{ register: RegisterCommand }>;
}

const commandModule = (names: string | readonly string[], load: CommandModule["load"]): CommandModule => ({
  names: typeof names === "string" ? [names] : names,
  load,
});

/**
 * The commands as `svc --help` lists them: in the order a user meets them, from a new project to its
 * deployment, operating it, and managing the service's resources.
 */
export const commandGroups: ReadonlyArray<{ heading: string; modules: readonly CommandModule[] }> = [
  {
    heading: "Start:",
    modules: [
      commandModule("init", () => import("./init.js")),
      commandModule("dev", () => import("./dev.js")),
      commandModule(["login", "logout", "whoami"], () => import("./login.js")),
      commandModule("doctor", () => import("./doctor.js")),
    ],
  },
  {
    heading: "Build and deploy:",
    modules: [
      commandModule("build", () => import("./build.js")),
      commandModule("deploy", () => import("./deploy.js")),
      commandModule("update", () => import("./update.js")),
      commandModule("rollback", () => import("./rollback.js")),
      commandModule("undeploy", () => import("./undeploy.js")),
      commandModule("images", () => import("./images.js")),
    ],
  },
  {
    heading: "Operate:",
    modules: [
      commandModule("run", () => import("./run.js")),
      commandModule("jobs", () => import("./jobs.js")),
      commandModule("logs", () => import("./logs.js")),
      commandModule("app", () => import("./app.js")),
      commandModule("env", () => import("./env.js")),
      commandModule("usage", () => import("./usage.js")),
    ],
  },
  {
    heading: "Manage:",
    modules: [
      commandModule("endpoint", () => import("./endpoint.js")),
      commandModule("volume", () => import("./volume.js")),
      commandModule("secret", () => import("./secret.js")),
      commandModule("template", () => import("./template.js")),
      commandModule("registry-auth", () => import("./registry-auth.js")),
      commandModule("keys", () => import("./keys.js")),
      commandModule("server", () => import("./server.js")),
      commandModule("models", () => import("./models.js")),
      // Completion reads the whole tree: naming it loads every command.
      commandModule([], () => import("./completion.js")),
    ],
  },
];

/**
 * The command a command line runs at the top level (its first word that is not one of svc's own options), when
 * one module registers it; undefined for anything that needs the whole tree (no command, help, completion, a word
 * that names no command, which then gets its "did you mean"). Pure.
 */
export function namedCommand(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === "--") return undefined;
    if (word === "--profile") {
      i++;
      continue;
    }
    if (word.startsWith("-")) continue;
    return commandGroups.some((g) => g.modules.some((m) => m.names.includes(word))) ? word : undefined;
  }
  return undefined;
}

/** The groups with the registrations of their commands: every command's, or only the module of `only`. */
export async function loadCommands(only?: string): Promise<Array<{ heading: string; commands: RegisterCommand[] }>> {
  return Promise.all(
    commandGroups.map(async (g) => ({
      heading: g.heading,
      commands: await Promise.all(g.modules.filter((m) => only === undefined || m.names.includes(only)).map(async (m) => (await m.load()).register)),
    })),
  );
}
