// Health of a load-balanced worker as its `/ping` path tells it: 200 ready, 204 initializing, anything else
// unhealthy, no answer unreachable, 404 (or 405) "has no /ping". `classifyPing` is pure; `probePing` asks once.
//
// checkPingPath is the check an endpoint deployed from a prebuilt image (not built by svc, so its worker may
// not serve /ping at all) goes through before it gets traffic: the service runs it on every address a worker
// registers, and a deploy of such an endpoint can run it and print its `message`.

export type PingState = "ready" | "initializing" | "missing" | "unhealthy" | "unreachable";

export interface PingAnswer {
  state: PingState;
  /** The HTTP status, when the worker answered. */
  status?: number;
}

export function classifyPing(status: number | undefined): PingState {
  if (status === undefined) return "unreachable";
  if (status === 200) return "ready";
  if (status === 204) return "initializing";
  if (status === 404 || status === 405) return "missing";
  return "unhealthy";
}

/** GET {address}/ping once, with `headers` (a worker's credential). Never throws. */
export async function probePing(address: string, timeoutMs = 2000, headers?: Record<string, string>): Promise<PingAnswer> {
  try {
    const response = await fetch(`${address.replace(/\/+$/, "")}/ping`, { signal: AbortSignal.timeout(timeoutMs), headers });
    await response.arrayBuffer().catch(() => undefined /* the status is the answer; the body is only drained */);
    return { state: classifyPing(response.status), status: response.status };
  } catch {
    return { state: "unreachable" };
  }
}

export interface PingCheck {
  ok: boolean;
  state: PingState;
  status?: number;
  /** For people: what was found and what to do. */
  message: string;
}

/**
 * Is `/ping` served at `address`? Waits while the worker is unreachable or initializing (up to `waitMs`), so a
 * slow-starting image is not declared broken. ok: 200 or 204 answered. Never throws.
 */
export async function checkPingPath(address: string, opts: { waitMs?: number; intervalMs?: number } = {}): Promise<PingCheck> {
  const deadline = Date.now() + (opts.waitMs ?? 0);
  for (;;) {
    const answer = await probePing(address);
    const settled = answer.state !== "unreachable" && answer.state !== "initializing";
    if (settled || Date.now() >= deadline) return pingVerdict(address, answer);
    await new Promise((resolve) => setTimeout(resolve, opts.intervalMs ?? 200));
  }
}

/** The verdict and message for one answer. Pure. */
export function pingVerdict(address: string, answer: PingAnswer): PingCheck {
  const base = { state: answer.state, status: answer.status };
  switch (answer.state) {
    case "ready":
      return { ...base, ok: true, message: `${address}/ping answered 200: ready for traffic` };
    case "initializing":
      return { ...base, ok: true, message: `${address}/ping answered 204: initializing; traffic starts once it answers 200` };
    case "missing":
      return {
        ...base,
        ok: false,
        message:
          `${address} has no /ping path (it answered ${answer.status}): a load-balanced endpoint's server must answer ` +
          "GET /ping with 204 while it initializes and 200 when ready; it gets no traffic until it does",
      };
    case "unhealthy":
      return { ...base, ok: false, message: `${address}/ping answered ${answer.status}: not healthy; it gets no traffic until /ping answers 200` };
    case "unreachable":
      return { ...base, ok: false, message: `${address} does not answer: nothing listens there, or it is still starting` };
  }
}
