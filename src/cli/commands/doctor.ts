// `svc doctor`: checks this machine and the service the CLI targets, with a fix for each problem.
// Exit 1 when a check failed (the service cannot be used), 0 otherwise; warnings do not fail it.

import type { Command } from "commander";
import { DEFAULT_SERVER_PORT } from "./server.js";
import {
  chromiumFinding,
  containerIsolationProbe,
  dockerFinding,
  gpuFindings,
  modelCacheFinding,
  nodeFinding,
  portFinding,
  postgresServerFinding,
  sandboxFinding,
  serviceCrashLoopFindings,
  serviceFinding,
  snapshotFinding,
  verdict,
  volumeQuotaFinding,
  type Finding,
  type Level,
} from "../../doctor/checks.js";
import { resolveSandbox } from "../../drivers/sandbox/index.js";
import { checkpointProblem } from "../../drivers/criu.js";
import { envSetting } from "svc/internal";
import { colorWanted, createOutput, styles as pc } from "../output.js";
import { serviceTarget } from "../target.js";
import { describeTarget } from "./login.js";

const MARK: Record<Level, (tty: boolean) => string> = {
  ok: (tty) => (tty ? pc.green("✔") : "ok  "),
  warn: (tty) => (tty ? pc.yellow("!") : "warn"),
  fail: (tty) => (tty ? pc.red("✖") : "FAIL"),
  info: (tty) => (tty ? pc.dim("·") : "info"),
};

/** One line a finding, its fix indented under it. Pure. */
export function renderFindings(findings: Finding[], tty: boolean): string {
  const width = Math.max(...findings.map((f) => f.check.length));
  return findings
    .map(
      (f) =>
        `${MARK[f.level](tty)} ${f.check.padEnd(width)}  ${f.detail}${f.fix && f.level !== "ok" ? `\n${" ".repeat((tty ? 2 : 5) + width + 2)}fix: ${f.fix}` : ""}`,
    )
    .join("\n");
}

export function register(program: Command): void {
  program
    .command("doctor")
    .description("Check Node, the Docker engine, GPUs, ports and the service this CLI talks to; a fix for each problem")
    .option("--dev", "also check what working on svc itself needs (Chromium for the console's tests, PostgreSQL's server binaries)")
    .option("--json", "print the findings as JSON")
    .action(async (o: { dev?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      const target = serviceTarget();
      const service = serviceFinding({ url: target.url, apiKey: target.apiKey, via: describeTarget(target) });
      const findings = (
        await Promise.all([
          Promise.resolve([nodeFinding(process.version)]),
          dockerFinding().then((f) => [f]),
          containerIsolationProbe(envSetting("SVC_DOCKER_RUNTIME")).then((f) => [f]),
          gpuFindings(),
          service.then((f) => [f]),
          // Endpoints of the service whose workers keep dying, once it answers with the key.
          service.then((f) => (f.level === "ok" ? serviceCrashLoopFindings(target) : [])),
          service.then((f) => (f.level === "ok" ? modelCacheFinding({ url: target.url, apiKey: target.apiKey }) : [])),
          service.then((f) => (f.level === "ok" ? volumeQuotaFinding({ url: target.url, apiKey: target.apiKey }) : [])),
          // The service just reached may be what holds the port: not a problem to fix.
          service.then((f) => portFinding(DEFAULT_SERVER_PORT, "svc server's default port", f.level === "ok" ? target.url : undefined)).then((f) => [f]),
          Promise.resolve([sandboxFinding(envSetting("SVC_SANDBOX") ?? "auto", (setting) => resolveSandbox({ setting }))]),
          checkpointProblem().then((problem) => [snapshotFinding(problem)]),
          // What only svc's own test suites use: a user building endpoints needs none of it.
          Promise.resolve(o.dev ? [chromiumFinding(), postgresServerFinding()] : []),
        ])
      ).flat();
      const code = verdict(findings);
      out.result({ ok: code === 0, findings }, () => renderFindings(findings, colorWanted(process.env, Boolean(process.stdout.isTTY))));
      process.exitCode = code;
    });
}
