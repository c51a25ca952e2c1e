// huggingface_hub for tests: a virtual environment with the library, installed once per machine from the pip
// index configured here (no internet: a local index), reused by later runs. Undefined, with why, when it cannot
// be installed: the tests that need it are skipped saying so.

import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const VENV = join(tmpdir(), "svc-test-venv-huggingface-hub");

export function huggingfaceHubPython(): { python: string; problem?: undefined } | { python?: undefined; problem: string } {
  const python = join(VENV, "bin", "python");
  const works = () => existsSync(python) && spawnSync(python, ["-c", "import huggingface_hub"], { stdio: "ignore" }).status === 0;
  if (works()) return { python };
  try {
    if (!existsSync(python)) execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
    // No retries: an index that cannot be reached (the public one, offline) is passed over at once.
    execFileSync(join(VENV, "bin", "pip"), ["install", "--quiet", "--retries", "0", "--timeout", "10", "huggingface-hub"], { stdio: "pipe", timeout: 300_000 });
  } catch (err) {
    return { problem: `huggingface_hub could not be pip-installed into ${VENV}: ${String((err as { stderr?: Buffer }).stderr ?? err).slice(-400)}` };
  }
  return works() ? { python } : { problem: `huggingface_hub was installed into ${VENV} but does not import` };
}

/** Run a Python script with this environment; its stdout, or throw with its stderr. */
export function runPython(python: string, script: string, env: Record<string, string>): string {
  const r = spawnSync(python, ["-c", script], { env, encoding: "utf8", timeout: 60_000 });
  if (r.status !== 0) throw new Error(`python exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}
