// `svc app list|get|delete`: the apps the service keeps. Deleting an app removes its environments' endpoints
// (answered once their workers have stopped) and its builds.

import { resolve } from "node:path";
import type { Command } from "commander";
import { DeployClient, serviceAddress, type EnvironmentInfo, type ReleaseInfo } from "../../deploy/client.js";
import { resolveApp } from "../../deploy/index.js";
import { createOutput } from "../output.js";
import { announceTarget } from "../target.js";
import { confirmDestructive } from "../confirm.js";

export function renderEnvironment(e: EnvironmentInfo): string[] {
  const lines = [`  ${e.env}  build ${e.build ? e.build.slice(0, 12) : "none"}  ${e.endpoints.length} endpoint(s)`];
  for (const p of e.endpoints) {
    lines.push(`    ${p.name}  ${p.type === "lb" ? "load-balanced" : "queue"}  ${p.url}`);
    if (p.routes.length > 0) lines.push(`      routes: ${p.routes.join(", ")}`);
    if (p.unhealthyWorkers && p.lastStartError) {
      lines.push(
        `      ${p.unhealthyWorkers} worker(s) failed to start recently; last error (${new Date(p.lastStartError.at).toISOString()}): ${p.lastStartError.message.split("\n")[0]}`,
      );
    }
  }
  if (e.releases && e.releases.length > 0) {
    lines.push("    releases (newest first):");
    for (const r of e.releases) lines.push(`      ${releaseLine(r)}`);
  }
  return lines;
}

/** One release of an environment's history: when, which build, its kind and outcome. Pure. */
export function releaseLine(r: ReleaseInfo): string {
  const when = new Date(r.startedAt).toISOString().replace("T", " ").slice(0, 19);
  const why = r.state === "failed" && r.error ? `: ${r.error.endpoint ? `${r.error.endpoint}: ` : ""}${r.error.message.split("\n")[0]}` : "";
  return `${when}  ${r.buildId.slice(0, 12)}  ${r.kind}  ${r.state}${why}`;
}

export function register(program: Command): void {
  const app = program.command("app").description("Apps on the service: list, get, delete");
  const client = () => {
    const address = serviceAddress(process.cwd());
    announceTarget(address);
    return new DeployClient(address);
  };

  app
    .command("list")
    .description("List apps and their environments")
    .option("--json", "print as JSON")
    .action(async (flags: { json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const { apps } = await client().apps();
      out.result({ apps }, () =>
        apps.length === 0 ? "No apps" : apps.map((a) => `${a.name}  environments: ${a.environments.join(", ") || "none"}`).join("\n"),
      );
    });

  app
    .command("get [name]")
    .description("Show an app: environments, builds and endpoints (default: this project's app)")
    .option("--json", "print as JSON")
    .action(async (name: string | undefined, flags: { json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const found = await client().app(resolveApp(name, resolve(process.cwd())));
      out.result(found, () => [`App ${found.name}`, ...found.environments.flatMap(renderEnvironment)].join("\n"));
    });

  app
    .command("delete <name>")
    .description("Delete an app with all its environments and endpoints")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print what was removed as JSON")
    .action(async (name: string, flags: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: flags.json });
      const c = client();
      const found = await c.app(name);
      const count = found.environments.reduce((n, e) => n + e.endpoints.length, 0);
      await confirmDestructive(out, flags.yes, `deletes app "${name}" with ${found.environments.length} environment(s) and ${count} endpoint(s)`);
      const answer = await c.deleteApp(name);
      out.result(answer, () => [`Deleted app ${name} (workers stopped)`, ...answer.removed.map((r) => `  - ${r.env}/${r.name} (${r.id})`)].join("\n"));
    });
}
