// How a pre-booted runtime in a container learns which worker it becomes. A container has no IPC channel to the
// service (the process driver's way, worker.ts `claimed()`): the Docker driver starts pooled containers with stdin
// open and attached, and writes the claim there, one JSON line. The runtime reads that one line and closes stdin.
//
// The container's stdin is closed by the engine when the driver's attachment goes (StdinOnce): a service killed
// with SIGKILL leaves pooled runtimes that see end-of-file and exit, instead of waiting for a claim forever.

/** Set (to "stdin") on a pooled runtime that takes its claim from stdin rather than over IPC. */
export const POOL_CHANNEL_ENV = "SVC_POOL_CHANNEL";

/** What a pooled runtime writes (to stderr) once loaded and waiting: the driver counts it ready from then on. */
export const POOL_READY_LINE = "[svc-runtime] pre-booted: waiting for a claim";

/** The claim line: the worker's whole protocol and endpoint environment (docs/worker-protocol.md). */
export interface StdinClaim {
  env: Record<string, string>;
}

/** The longest claim line read (an endpoint's variables and secrets are well below it). */
const MAX_CLAIM_BYTES = 4 * 1024 * 1024;

/**
 * The environment a claimed runtime runs with: what the container was started with (the image's PATH, HOME...),
 * minus svc's own pool settings, then the claim's. Nothing of the pool's SVC_* survives into user code. Pure.
 */
export function claimedEnvironment(current: NodeJS.ProcessEnv, claim: StdinClaim): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(current)) if (!key.startsWith("SVC_") && value !== undefined) env[key] = value;
  Object.assign(env, claim.env);
  return env;
}

/** Parse a claim line; undefined when it is not one (nothing to become). Pure. */
export function parseClaim(line: string): StdinClaim | undefined {
  try {
    const value = JSON.parse(line) as { env?: unknown };
    if (!value || typeof value.env !== "object" || value.env === null) return undefined;
    const env: Record<string, string> = {};
    for (const [key, v] of Object.entries(value.env as Record<string, unknown>)) if (typeof v === "string") env[key] = v;
    return { env };
  } catch {
    return undefined;
  }
}

/**
 * Wait for the claim on stdin and make this process that worker: its environment replaced before any user code
 * loads. False when stdin ends (the driver went away) or the line is not a claim: the runtime exits.
 */
export function claimFromStdin(write: (text: string) => void): Promise<boolean> {
  return new Promise((resolve) => {
    const stdin = process.stdin;
    let buffered = "";
    const finish = (ok: boolean) => {
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      stdin.off("error", onEnd);
      // From here stdin is not read: an open handle would keep the worker alive past its drain.
      stdin.pause();
      stdin.destroy();
      resolve(ok);
    };
    const onData = (chunk: Buffer | string) => {
      buffered += chunk.toString();
      const newline = buffered.indexOf("\n");
      if (newline < 0) {
        if (buffered.length > MAX_CLAIM_BYTES) finish(false);
        return;
      }
      const claim = parseClaim(buffered.slice(0, newline));
      if (!claim) {
        write("[svc-runtime] pre-booted: the claim is not valid JSON; exiting\n");
        return finish(false);
      }
      const env = claimedEnvironment(process.env, claim);
      for (const key of Object.keys(process.env)) if (!Object.hasOwn(env, key)) delete process.env[key];
      Object.assign(process.env, env);
      finish(true);
    };
    const onEnd = () => finish(false);
    stdin.on("data", onData);
    stdin.once("end", onEnd);
    stdin.once("error", onEnd);
    write(`${POOL_READY_LINE}\n`);
  });
}
