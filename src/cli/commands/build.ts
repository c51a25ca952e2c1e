// `svc build`: discover endpoints, bundle handlers, install Linux x86_64 dependencies, write the manifest and
// pack .svc/artifact.tar.gz. The work is buildProject(); this file parses flags and renders.

import { relative, resolve } from "node:path";
import type { Command } from "commander";
import { buildProject, formatBytes, summarizeBuild, type BuildResult } from "../../build/index.js";
import { colorWanted, createOutput, formatDuration, styles as pc } from "../output.js";

interface BuildFlags {
  exclude?: string[];
  keepBuild?: boolean;
  json?: boolean;
  dir?: string;
}

/** A path relative to cwd when it is inside it, else absolute. */
function shownPath(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith("..") ? rel : path;
}

export function renderBuild(result: BuildResult, cwd: string, color: boolean): string {
  const c = color ? pc : { bold: (s: string) => s, dim: (s: string) => s, green: (s: string) => s };
  const lines: string[] = [];
  lines.push(c.bold(`Built ${result.manifest.app}: ${result.endpoints.length} endpoint(s)`));
  for (const endpoint of result.endpoints) {
    const resource = result.manifest.resources[endpoint.name]!;
    const where = resource.computeType === "GPU" ? `gpu ${resource.gpuIds}` : `cpu ${resource.instanceIds.join(",")}`;
    lines.push(
      `  ${c.green(endpoint.name)} ${c.dim(`(${endpoint.type === "lb" ? "load-balanced" : "queue"}, ${where}, workers ${resource.workersMin}-${resource.workersMax})`)}`,
    );
    if (endpoint.image !== undefined) lines.push(`    image: ${endpoint.image} (its container runs the jobs; no code bundled)`);
    if (endpoint.functions.length > 0) lines.push(`    functions: ${endpoint.functions.join(", ")}`);
    if (endpoint.routes.length > 0) lines.push(`    routes: ${endpoint.routes.join(", ")}`);
    if (endpoint.dependencies.length > 0) lines.push(`    dependencies: ${endpoint.dependencies.join(", ")}`);
  }
  lines.push(`Dependencies: ${result.dependencies.length > 0 ? result.dependencies.join(", ") : "none"}`);
  if (result.excluded.length > 0) lines.push(`Excluded: ${result.excluded.join(", ")}`);
  lines.push(`Manifest: ${shownPath(result.manifestPath, cwd)}`);
  lines.push(`Artifact: ${shownPath(result.artifactPath, cwd)} (${formatBytes(result.artifactBytes)})`);
  lines.push(`Time: ${formatDuration(result.durationMs)}`);
  return lines.join("\n");
}

export function register(program: Command): void {
  program
    .command("build")
    .description("Discover endpoints, bundle handlers, install Linux x86_64 dependencies and pack .svc/artifact.tar.gz")
    .option("--exclude <packages>", "leave more packages out of the artifact (comma-separated, repeatable)", (value: string, previous: string[] = []) => [
      ...previous,
      value,
    ])
    .option("--keep-build", "keep .svc/.build/ (generated handlers, staging tree)")
    .option("--json", "print the build summary as JSON")
    .option("-C, --dir <path>", "project directory (default: the current directory)")
    .action(async (flags: BuildFlags) => {
      const out = createOutput({ json: flags.json });
      const root = resolve(flags.dir ?? process.cwd());
      const steps = out.steps();
      let result: BuildResult;
      try {
        result = await buildProject(root, { exclude: flags.exclude, keepBuild: flags.keepBuild, onProgress: steps.onProgress });
        steps.done();
      } catch (err) {
        steps.done(err);
        throw err;
      }
      for (const warning of result.warnings) out.warn(warning);
      out.result(summarizeBuild(result), () => renderBuild(result, process.cwd(), colorWanted(process.env, Boolean(process.stdout.isTTY))));
    });
}
