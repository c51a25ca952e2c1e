// `svc deploy`: build, upload, provision, print each endpoint's URL (routes for load-balanced ones) and a curl.
// The work is deploy() in src/deploy; this file parses flags, asks (on a TTY only) and renders.

import { resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { deploy, type DeployResult } from "../../deploy/index.js";
import { UsageError } from "../../errors.js";
import { createOutput, type Output } from "../output.js";

interface DeployFlags {
  env?: string;
  app?: string;
  exclude?: string[];
  dryRun?: boolean;
  json?: boolean;
  yes?: boolean;
  dir?: string;
}

/** A yes/no question on stderr; only called when the output is interactive. */
export async function askOnTty(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** Destructive lifecycle commands: ask on a TTY, else require --yes (naming it). */
export async function confirmDestructive(out: Output, yes: boolean | undefined, what: string): Promise<void> {
  if (yes) return;
  if (!out.interactive) throw new UsageError(`This ${what}`, "Pass --yes to confirm (svc never asks without a terminal or with CI set).");
  if (!(await askOnTty(`This ${what}. Continue?`))) throw new UsageError("Cancelled; nothing was changed");
}

const MARK: Record<string, string> = { create: "+", update: "~", unchanged: "=" };
const VERB: Record<string, string> = { create: "created", update: "updated (rolling release)", unchanged: "unchanged" };

export function renderDeploy(result: DeployResult): string {
  const lines: string[] = [];
  const head = result.dryRun ? `Plan for ${result.app}/${result.env} (dry run, nothing changed)` : `Deployed ${result.app} to ${result.env}`;
  lines.push(`${head} on ${result.url}  build ${result.build.id.slice(0, 12)}${result.build.uploaded ? " (uploaded)" : " (already on the service)"}`);
  for (const e of result.endpoints) {
    const kind = e.type === "lb" ? "load-balanced" : "queue";
    lines.push(`  ${MARK[e.action]} ${e.name}  ${kind}  ${result.dryRun ? `would be ${e.action === "update" ? "updated" : e.action === "create" ? "created" : "unchanged"}` : VERB[e.action]}`);
    if (e.url) lines.push(`      ${e.url}`);
    if (e.routes.length > 0) lines.push(`      routes: ${e.routes.join(", ")}`);
  }
  for (const r of result.removed) lines.push(`  - ${r.name}  ${result.dryRun ? "would be removed" : "removed"}`);
  if (result.curl && !result.dryRun) {
    lines.push("Try it:");
    lines.push(`  ${result.curl}`);
  }
  return lines.join("\n");
}

export function register(program: Command): void {
  program
    .command("deploy")
    .description("Build, upload and provision the app's endpoints in an environment (rolling release when sources changed)")
    .option("--env <name>", "target environment (created with the app when absent)")
    .option("--app <name>", "app name (default: SVC_APP, else the project's package.json name)")
    .option("--exclude <packages>", "leave more packages out of the artifact (comma-separated, repeatable)", (value: string, previous: string[] = []) => [...previous, value])
    .option("--dry-run", "print the plan (endpoints to create, update, remove) and change nothing")
    .option("--yes", "confirm destructive steps (removing endpoints) without asking")
    .option("--json", "print the result as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .action(async (flags: DeployFlags) => {
      const out = createOutput({ json: flags.json });
      let lastPercent = -1;
      const result = await deploy({
        root: resolve(flags.dir ?? process.cwd()),
        env: flags.env,
        app: flags.app,
        exclude: flags.exclude,
        dryRun: flags.dryRun,
        yes: flags.yes,
        interactive: out.interactive,
        confirm: askOnTty,
        onProgress: (label) => out.info(`${label}...`),
        onUpload: (sent, total) => {
          const percent = total === 0 ? 100 : Math.floor((sent / total) * 100);
          // Every 10 % on a pipe; a TTY gets a line that rewrites itself.
          if (process.stderr.isTTY) process.stderr.write(`\r  uploaded ${percent}% (${sent}/${total} bytes)${percent === 100 ? "\n" : ""}`);
          else if (percent >= lastPercent + 10 || (percent === 100 && lastPercent !== 100)) {
            lastPercent = percent;
            process.stderr.write(`  uploaded ${percent}% (${sent}/${total} bytes)\n`);
          }
        },
      });
      for (const warning of result.warnings) out.warn(warning);
      out.result(result, () => renderDeploy(result));
    });
}
