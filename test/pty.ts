// Runs a program under a real pseudo-terminal (Python's pty module; node-pty is not a dependency) and answers its
// prompts: for tests of what a person at a terminal sees (hidden input, spinners, colours).

import { spawn } from "node:child_process";

const DRIVER = String.raw`
import fcntl, json, os, pty, re, select, struct, sys, termios, time
spec = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    if spec.get("columns"):
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, spec["columns"], 0, 0))
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
out = b""
steps = spec["steps"]
deadline = time.time() + spec["timeout"]
status = None
while time.time() < deadline:
    if steps and re.search(steps[0]["expect"].encode(), out):
        os.write(fd, steps.pop(0)["send"].encode())
        continue
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        out += data
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        try:
            while True:
                r, _, _ = select.select([fd], [], [], 0.05)
                if not r: break
                data = os.read(fd, 65536)
                if not data: break
                out += data
        except OSError:
            pass
        break
if status is None:
    try:
        _, status = os.waitpid(pid, 0 if time.time() < deadline else os.WNOHANG)
    except ChildProcessError:
        status = 0
code = os.waitstatus_to_exitcode(status) if status is not None else None
sys.stdout.write(json.dumps({"code": code, "output": out.decode("utf-8", "replace")}))
`;

export interface PtyStep {
  /** A regular expression (Python syntax) the output so far must match before `send` is typed. */
  expect: string;
  send: string;
}

/** `columns`: the terminal's width (24 rows), as a narrow window would report it; default the pty's own. */
export function runInPty(
  argv: string[],
  env: NodeJS.ProcessEnv,
  steps: PtyStep[] = [],
  timeoutMs = 30_000,
  columns?: number,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("python3", ["-c", DRIVER, JSON.stringify({ argv, env, steps, timeout: timeoutMs / 1000, columns })], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", () => {
      try {
        resolve(JSON.parse(stdout) as { code: number | null; output: string });
      } catch {
        reject(new Error(`pty driver failed: ${stderr}`));
      }
    });
  });
}
