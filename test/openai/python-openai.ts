// A Python with the official `openai` package: the host's python3 when it has it, else a virtual environment in the
// temp dir into which pip installs it from the configured package index (kept for later runs). Undefined, with
// the reason, when neither works (no python3, no venv module, no pip, or no index that has the package).

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorMessage } from "../../src/errors.js";

const VENV = join(tmpdir(), "svc-test-python-openai");

function imports(python: string): boolean {
  try {
    execFileSync(python, ["-c", "import openai"], { stdio: "ignore", timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

export function pythonWithOpenAi(): { python: string } | { missing: string } {
  if (imports("python3")) return { python: "python3" };
  const venvPython = join(VENV, "bin", "python");
  if (existsSync(venvPython) && imports(venvPython)) return { python: venvPython };
  const dir = mkdtempSync(join(tmpdir(), "svc-test-python-openai-"));
  try {
    execFileSync("python3", ["-m", "venv", dir], { stdio: "pipe", timeout: 60_000 });
    // --retries 0: an index that cannot be reached is given up at once for the others configured.
    execFileSync(join(dir, "bin", "python"), ["-m", "pip", "install", "--quiet", "--retries", "0", "openai"], { stdio: "pipe", timeout: 300_000 });
    rmSync(VENV, { recursive: true, force: true });
    renameSync(dir, VENV);
    return { python: venvPython };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim().split("\n").slice(-3).join(" ");
    return { missing: `the Python openai package could not be installed with pip: ${stderr || errorMessage(err)}` };
  }
}
