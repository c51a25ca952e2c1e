// `svc rollback [--env] [--to <build>]`: the environment's previous build (or a named one) active again, through
// the same release rule as a deploy. The work is rollback() in src/deploy/rollback.ts.

import { resolve } from "node:path";
import { serviceAddress } from "../../deploy/client.js";
import { announceTarget } from "../target.js";
import type { Command } from "commander";
import { rollback } from "../../deploy/rollback.js";
import type { ReleaseInfo } from "../../deploy/client.js";
import { askOnTty } from "../confirm.js";
import { createOutput } from "../output.js";
import { releaseEndpointState } from "./deploy.js";

export function register(program: Command): void {
  program
    .command("rollback")
    .description("Make the environment's previous build (or --to <build>) active again; its workers start before it switches")
    .option("--env <name>", "environment (default: SVC_ENV, else the app's only one)")
    .option("--app <name>", "app name (default: SVC_APP, else the project's)")
    .option("--to <build>", "the build to go back to: its id or the start of it (`svc env get` lists them)")
    .option("--yes", "confirm removing endpoints the older build does not have, without asking")
    .option("--detach", "return once the release began, without waiting for its workers")
    .option("--json", "print the result as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .action(async (flags: { env?: string; app?: string; to?: string; yes?: boolean; detach?: boolean; json?: boolean; dir?: string }) => {
      const out = createOutput({ json: flags.json });
      const steps = out.steps();
      const said = new Map<string, string>();
      const onRelease = (release: ReleaseInfo) => {
        if (said.size === 0 && release.endpoints.length > 0) steps.onProgress(`Starting workers of ${release.endpoints.map((e) => e.name).join(", ")}`);
        for (const e of release.endpoints) {
          const text = releaseEndpointState(e);
          if (said.get(e.name) === text) continue;
          said.set(e.name, text);
          if (out.tty) steps.detail(`${e.name}: ${text}`);
          else out.info(`  ${e.name}: ${text}`);
        }
      };
      let result;
      try {
        const root = resolve(flags.dir ?? process.cwd());
        const address = serviceAddress(root, flags.env);
        announceTarget(address);
        result = await rollback({
          address,
          root,
          app: flags.app,
          env: flags.env,
          to: flags.to,
          yes: flags.yes,
          detach: flags.detach,
          interactive: out.interactive,
          confirm: async (question) => {
            steps.done();
            return askOnTty(question);
          },
          onRelease,
        });
        steps.done();
      } catch (err) {
        steps.done(err);
        throw err;
      }
      const r = result;
      out.result(r, () =>
        r.release?.state === "starting"
          ? `Rolling ${r.app}/${r.env} back to build ${r.to.slice(0, 12)} (--detach): \`svc env get ${r.env}\` shows when it is live`
          : `Rolled ${r.app}/${r.env} back to build ${r.to.slice(0, 12)} (was ${r.from ? r.from.slice(0, 12) : "none"})`,
      );
    });
}
