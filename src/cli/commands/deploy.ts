// `svc deploy`: build, upload, provision, print each endpoint's URL (routes for load-balanced ones) and a curl.
// The work is deploy() in src/deploy; this file parses flags, asks (on a TTY only) and renders.
// `svc deploy --preview`: the same app on this machine, one container per endpoint (src/preview), until Ctrl-C.

import { resolve } from "node:path";
import type { Command } from "commander";
import { deploy, type DeployResult } from "../../deploy/index.js";
import { serviceAddress, type ReleaseInfo } from "../../deploy/client.js";
import { envSetting } from "svc/internal";
import { UsageError } from "../../errors.js";
import type { WorkerLogLine } from "../../drivers/types.js";
import type { PreviewEvent } from "../../preview/session.js";
import { askOnTty } from "../confirm.js";
import { announceTarget, keyForShell } from "../target.js";
import { namedProfile } from "../../profiles.js";
import { alignRows, createOutput, endpointTable, styles as pc, type Output } from "../output.js";

interface DeployFlags {
  env?: string;
  app?: string;
  exclude?: string[];
  dryRun?: boolean;
  json?: boolean;
  yes?: boolean;
  dir?: string;
  preview?: boolean;
  port?: string;
  allowCpuFallback?: boolean;
  detach?: boolean;
}

const MARK: Record<string, string> = { create: "+", update: "~", unchanged: "=" };
const VERB: Record<string, string> = { create: "created", update: "updated (rolling release)", unchanged: "unchanged" };

function buildState(result: DeployResult): string {
  if (result.dryRun) return result.build.onService ? "dry run: already on the service" : `dry run: not uploaded, ${result.build.size} bytes`;
  return result.build.uploaded ? "uploaded" : "already on the service";
}

export function renderDeploy(result: DeployResult): string {
  const lines: string[] = [];
  const head = result.dryRun ? `Plan for ${result.app}/${result.env} (dry run, nothing changed)` : `Deployed ${result.app} to ${result.env}`;
  lines.push(`${head} on ${result.url}  build ${result.build.id.slice(0, 12)} (${buildState(result)})`);
  const state = (action: string) =>
    result.dryRun ? `would be ${action === "update" ? "updated" : action === "create" ? "created" : "unchanged"}` : VERB[action]!;
  const rows = [
    ...result.endpoints.map((e) => [`${MARK[e.action]!} ${e.name}`, e.type === "lb" ? "load-balanced" : "queue", state(e.action)]),
    ...result.removed.map((r) => [`- ${r.name}`, "", result.dryRun ? "would be removed" : "removed"]),
  ];
  const aligned = alignRows(rows);
  result.endpoints.forEach((e, i) => {
    lines.push(`  ${aligned[i]}`);
    if (e.url) lines.push(`      ${e.url}`);
    if (e.routes.length > 0) lines.push(`      routes: ${e.routes.join(", ")}`);
  });
  for (const line of aligned.slice(result.endpoints.length)) lines.push(`  ${line}`);
  if (result.release?.state === "starting") {
    lines.push(`Release ${result.release.id} began (--detach): its new workers are starting; \`svc env get --env ${result.env}\` shows whether it went live`);
  } else if (result.release && result.release.endpoints.length > 0) {
    lines.push(`New workers started for ${result.release.endpoints.map((e) => e.name).join(", ")}; the previous ones drain after their jobs`);
  }
  if (result.curl && !result.dryRun) {
    lines.push("Try it:");
    lines.push(`  ${result.curl}`);
  }
  return lines.join("\n");
}

/** One endpoint of a starting release, as the progress line says it. Pure. */
export function releaseEndpointState(e: ReleaseInfo["endpoints"][number]): string {
  if (e.state === "ready") return "ready";
  if (e.state === "failed") return `failed after ${e.attempts} attempt(s)`;
  if (e.waiting) return e.waiting;
  return e.failures > 0 ? `starting (attempt ${e.attempts}, ${e.failures} failed: ${e.error?.split("\n")[0] ?? "no reason"})` : "starting";
}

/** The app and environment a progress line says a deploy is provisioning (the release begins then), if it is that line. Pure. */
export function provisioningTarget(progressText: string): { app: string; env: string } | undefined {
  const m = /^Provisioning \d+ endpoint\(s\) in ([^/\s]+)\/(\S+)$/.exec(progressText);
  return m ? { app: m[1]!, env: m[2]! } : undefined;
}

/**
 * What Ctrl-C during `svc deploy` leaves, as said before exiting 130: once the release began, it goes on on the
 * service (stopping the CLI does not stop it), so how to follow it and how to undo it; before, nothing changed.
 * Pure.
 */
export function interruptedDeployText(signal: string, releasing: { app: string; env: string } | undefined): string {
  if (!releasing)
    return `${signal}: deploy stopped before its release began; no endpoint changed (a build already uploaded stays on the service for the next deploy)`;
  const where = `--app ${releasing.app} --env ${releasing.env}`;
  return [
    `${signal}: svc stopped waiting, but the release of ${releasing.app}/${releasing.env} goes on on the service: its new workers start and it goes live when they are ready`,
    `  follow it:     svc env get ${where}`,
    `  roll it back:  svc rollback ${where}`,
  ].join("\n");
}

/** Flags that make no sense with --preview, or only with it. */
export function checkPreviewFlags(flags: DeployFlags): void {
  if (!flags.preview) {
    if (flags.port !== undefined)
      throw new UsageError("--port goes with --preview", "A deploy goes to the service at SVC_API_URL; `svc deploy --preview --port <n>` runs one here.");
    if (flags.allowCpuFallback) throw new UsageError("--allow-cpu-fallback goes with --preview");
    return;
  }
  if (flags.env !== undefined)
    throw new UsageError(
      '--preview runs its own environment ("preview"); leave out --env',
      "Deploy to an environment with `svc deploy --env <name>`, or preview locally with `svc deploy --preview`.",
    );
  if (flags.dryRun) throw new UsageError("--preview and --dry-run do not go together");
  if (flags.detach) throw new UsageError("--detach goes with a deploy to a service; --preview runs until Ctrl-C");
}

const LOG_COLOURS = [pc.cyan, pc.magenta, pc.yellow, pc.green, pc.blue];

/** `svc deploy --preview`: start, print the endpoints, stream worker output on stderr, stop on SIGINT/SIGTERM. */
async function runPreview(flags: DeployFlags, out: Output): Promise<void> {
  let port: number | undefined;
  if (flags.port !== undefined) {
    port = Number(flags.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, not "${flags.port}"`);
  }
  const root = resolve(flags.dir ?? process.cwd());
  const tty = out.color;
  // One prefix width for every endpoint, so the worker output lines up; a colour per endpoint on a TTY.
  let width = 0;
  const colours = new Map<string, (s: string) => string>();
  const { startPreviewSession } = await import("../../preview/session.js");
  const { prefixLine } = await import("../../preview/render.js");
  const onLog = (name: string, line: WorkerLogLine) => {
    let prefix = prefixLine(name, width, "");
    if (tty) {
      if (!colours.has(name)) colours.set(name, LOG_COLOURS[colours.size % LOG_COLOURS.length]!);
      prefix = colours.get(name)!(prefix);
    }
    out.info(`${prefix}${tty && line.stream === "log" ? pc.dim(line.text) : line.text}`);
  };
  const onEvent = (event: PreviewEvent) => {
    switch (event.type) {
      case "stale-removed":
        out.info(
          `removed what ${event.sessions.length} crashed preview(s) left: ${event.removed.containers} container(s), ${event.removed.networks} network(s), ${event.removed.volumes} volume(s)`,
        );
        break;
      case "built":
        width = Math.max(...Object.keys(event.build.manifest.resources).map((n) => n.length));
        for (const warning of event.build.warnings) out.warn(warning);
        break;
      case "port-fallback":
        out.info(`port ${event.requested} is in use; listening on ${event.port} instead`);
        break;
      case "warning":
        out.warn(event.message);
        break;
      case "not-ready":
        out.warn(`not answering after ${Math.round(event.waitedMs / 1000)} s: ${event.endpoints.join(", ")} (see their log lines above)`);
        break;
      case "service-log":
        out.info(tty ? pc.dim(`[svc] ${event.message}`) : `[svc] ${event.message}`);
        break;
    }
  };

  // Signals from the start on: one while starting aborts the start (and removes what it created); once
  // running, the first one stops the preview cleanly; a second one exits at once (the next start cleans up).
  const abort = new AbortController();
  let stopped!: () => void;
  const stop = new Promise<void>((done) => (stopped = done));
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      process.stderr.write(`${signal} again: exiting without cleaning up (the next preview removes what is left)\n`);
      process.exit(130);
    }
    out.info(`${signal}: stopping the preview...`);
    abort.abort();
    stopped();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    let session;
    // Worker output streams while the preview starts: each line is written above the running step's spinner.
    const steps = out.steps();
    try {
      session = await startPreviewSession({
        root,
        port,
        app: flags.app,
        exclude: flags.exclude,
        allowCpuFallback: flags.allowCpuFallback,
        signal: abort.signal,
        onEvent,
        onLog,
        onProgress: steps.onProgress,
      });
      steps.done();
    } catch (err) {
      steps.done(err);
      if (abort.signal.aborted) {
        // Interrupted while starting: the start removed what it had made.
        out.info("preview stopped before it was ready; its containers, network and volumes are removed");
        return;
      }
      throw err;
    }
    const s = session;
    const keyShown = s.endpoints[0]?.curl.includes("$SVC_API_KEY") ? undefined : s.apiKey;
    out.result({ url: s.url, app: s.app, env: s.env, session: s.session, apiKey: keyShown, endpoints: s.endpoints }, () =>
      [
        `svc preview: ${s.url}  (app ${s.app}, environment ${s.env}, Docker session ${s.session})`,
        ...(keyShown ? [`API key: ${keyShown}`] : []),
        "",
        endpointTable(s.endpoints),
      ].join("\n"),
    );
    out.info("Streaming worker output. Press Ctrl-C to stop and remove the containers.");
    await stop;
    await s.close();
    out.info("preview stopped; its containers, network and volumes are removed");
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

export function register(program: Command): void {
  program
    .command("deploy")
    .description("Build, upload and provision the app's endpoints in an environment (rolling release when sources changed)")
    .option("--env <name>", "target environment (created with the app when absent)")
    .option("--app <name>", "app name (default: SVC_APP, else the project's package.json name)")
    .option("--exclude <packages>", "leave more packages out of the artifact (comma-separated, repeatable)", (value: string, previous: string[] = []) => [
      ...previous,
      value,
    ])
    .option("--dry-run", "print the plan (endpoints to create, update, remove) and change nothing")
    .option("--yes", "confirm destructive steps (removing endpoints) without asking")
    .option("--json", "print the result as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .option("--preview", "run the app on this machine instead: one Docker container per endpoint, local URLs, until Ctrl-C")
    .option("--port <n>", "with --preview: port of the local service (default 8700, or a free one when taken)")
    .option("--allow-cpu-fallback", "with --preview: run GPU endpoints on CPU when this machine has no GPU")
    .option("--detach", "return once the release began, without waiting for its new workers to start (see `svc env get`)")
    .action(async (flags: DeployFlags) => {
      checkPreviewFlags(flags);
      const out = createOutput({ json: flags.json });
      if (flags.preview) return runPreview(flags, out);
      let lastPercent = -1;
      const root = resolve(flags.dir ?? process.cwd());
      // Said before anything happens, so that a deploy never lands unnoticed somewhere the user did not mean.
      const address = serviceAddress(root, flags.env);
      announceTarget(address);
      const steps = out.steps();
      const said = new Map<string, string>();
      // Each endpoint's new workers as they come up: a spinner's detail on a TTY, a line per change otherwise.
      const onRelease = (release: ReleaseInfo) => {
        if (said.size === 0) steps.onProgress(`Starting new workers of ${release.endpoints.map((e) => e.name).join(", ")}`);
        const states = release.endpoints.map((e) => ({ name: e.name, text: releaseEndpointState(e) }));
        if (out.tty) steps.detail(states.map((e) => `${e.name}: ${e.text}`).join(", "));
        for (const e of states) {
          if (said.get(e.name) === e.text) continue;
          said.set(e.name, e.text);
          if (!out.tty) out.info(`  ${e.name}: ${e.text}`);
        }
      };
      // Ctrl-C: said what it leaves (the release goes on once begun), then the usual 130.
      let releasing: { app: string; env: string } | undefined;
      const onProgress = (text: string) => {
        releasing ??= provisioningTarget(text);
        steps.onProgress(text);
      };
      const onSignal = (signal: NodeJS.Signals) => {
        steps.done();
        process.stderr.write(`${interruptedDeployText(signal, releasing)}\n`);
        process.exit(130);
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      let result: DeployResult;
      try {
        result = await deploy({
          root,
          address,
          // The curl must work in the shell it is printed in: a dev session's key is no secret and not in the
          // shell's SVC_API_KEY, so it is shown as it is; a service's key is never printed: `$SVC_API_KEY` where the
          // shell has it, else `$(svc whoami --key)` (after `svc login`, nothing set SVC_API_KEY).
          apiKeyShown:
            address.source === "dev-session" && envSetting("SVC_API_KEY") !== address.apiKey
              ? address.apiKey
              : keyForShell({
                  key: address.apiKey,
                  exported: process.env.SVC_API_KEY,
                  invokedAs: process.argv[1] ?? "svc",
                  cwd: process.cwd(),
                  profileFlag: namedProfile(),
                }),
          env: flags.env,
          app: flags.app,
          exclude: flags.exclude,
          dryRun: flags.dryRun,
          yes: flags.yes,
          interactive: out.interactive,
          confirm: async (question) => {
            steps.done();
            return askOnTty(question);
          },
          onProgress,
          detach: flags.detach,
          onRelease,
          onUpload: (sent, total) => {
            const percent = total === 0 ? 100 : Math.floor((sent / total) * 100);
            // Beside the spinner on a TTY; every 10 % as a line on a pipe.
            if (out.tty) steps.detail(`${percent}%`);
            else if (percent >= lastPercent + 10 || (percent === 100 && lastPercent !== 100)) {
              lastPercent = percent;
              out.info(`  uploaded ${percent}% (${sent}/${total} bytes)`);
            }
          },
        });
        steps.done();
      } catch (err) {
        steps.done(err);
        throw err;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      for (const warning of result.warnings) out.warn(warning);
      out.result(result, () => renderDeploy(result));
    });
}
