// End to end: `svc dev` on a project with a load-balanced endpoint prints the endpoint's own address
// ({service}/lb/{id}) and a curl that, pasted into a shell as printed, reaches one of its routes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { firstJsonOnStdout } from "../cli-output.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");

interface Ready {
  url: string;
  apiKey: string;
  endpoints: Array<{ name: string; id: string; type: string; url: string; routes: string[]; curl: string }>;
}

let work: string;
let dev: ChildProcessWithoutNullStreams;
let ready: Ready;
let stderr = "";

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "svc-dev-lb-"));
  const project = join(work, "lb-app");
  cpSync(join(repo, "fixtures", "lb-app"), project, { recursive: true });
  mkdirSync(join(project, "node_modules"));
  symlinkSync(join(repo, "packages", "svc"), join(project, "node_modules", "svc"), "dir");
  const env = { ...process.env, CI: "true", LB_APP_INIT_MS: "0" };
  delete env.SVC_API_KEY;
  delete env.SVC_API_URL;
  dev = spawn(process.execPath, [bin, "dev", "--port", "0", "--json", "--no-watch"], { cwd: project, env });
  dev.stderr.on("data", (d) => (stderr += d.toString()));
  ready = await firstJsonOnStdout<Ready>(dev, "svc dev", 90_000, () => stderr);
}, 120_000);

afterAll(async () => {
  // Stopped as a user stops it (Ctrl-C), so its workers go with it; SIGKILL only if it hangs.
  if (dev && dev.exitCode === null) {
    const exited = new Promise((resolve) => dev.once("exit", resolve));
    dev.kill("SIGINT");
    const timer = setTimeout(() => dev.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(work, { recursive: true, force: true });
}, 20_000);

describe("svc dev with a load-balanced endpoint", () => {
  it("prints the endpoint's own address and a curl that reaches a route as pasted", () => {
    const api = ready.endpoints.find((e) => e.name === "api")!;
    expect(api.type).toBe("lb");
    expect(api.url).toBe(`${ready.url}/lb/${api.id}`);
    expect(api.routes).toContain("GET /items/:id");
    expect(api.curl).toMatch(new RegExp(`^curl -s -X GET ${api.url}/`));
    // The printed command, run by a shell as printed (the key is the session's own), answers 200 from a worker.
    const run = spawnSync("bash", ["-c", `${api.curl} -o /dev/null -w '%{http_code} %header{x-svc-worker}'`], { encoding: "utf8", timeout: 60_000 });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^200 \S+$/);
  }, 90_000);
});
