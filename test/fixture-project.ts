// A project of `fixtures/` as a user would have it: copied into a work directory, with `svc` resolving to this
// checkout, and deployed through the `svc` binary to a running service.

import { execFile } from "node:child_process";
import { cpSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("..", import.meta.url));

/** Copy `fixtures/<name>` into `work`; its path. */
export function copyFixture(name: string, work: string): string {
  const project = join(work, name);
  cpSync(join(repo, "fixtures", name), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  return project;
}

/** An empty project `name` at `work/app`, with a `src/` to write its code into and `svc` resolving to this checkout; its path. */
export function emptyProject(work: string, name: string): string {
  const project = join(work, "app");
  mkdirSync(join(project, "src"), { recursive: true });
  writeFileSync(join(project, "package.json"), JSON.stringify({ name, private: true, type: "module" }));
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  return project;
}

/**
 * `svc deploy --env <env>` of `project` to the service at `url` (CI set: no prompt, no spinner). Asynchronous, so a
 * server or proxy in the test's own process goes on answering meanwhile. Rejects with the command's output.
 */
export async function deployFixture(project: string, url: string, key: string, env = "prod"): Promise<{ stdout: string; stderr: string }> {
  const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
  for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
  try {
    return await run(process.execPath, [join(repo, "bin", "svc.js"), "deploy", "--env", env], {
      cwd: project,
      env: { ...base, SVC_API_URL: url, SVC_API_KEY: key },
      timeout: 120_000,
    });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`svc deploy failed:\n${stdout ?? ""}\n${stderr ?? ""}`);
  }
}
