// Which requests the LB front may serve, told from their first bytes before anything is parsed: an LB endpoint by
// path or by `*.lb.localhost` host, a job `/run`, a job API read, a worker's take (of either protocol) or job-done. Every request the front sees
// asks these first, so they read bytes with no call into node. Apart from the connection (front-connection.ts),
// which acts on the answers, so that they are tested alone.

const LB_HOST = Buffer.from(".lb.localhost", "latin1");

/**
 * Whether the request that starts `data` addresses an LB endpoint by its path (`METHOD /lb/...`). Read byte by
 * byte, with no call into node: every request the front sees asks this first. Pure.
 */
export function lbByPath(data: Buffer): boolean {
  // A method is 3 to 7 letters: the path starts after the first space.
  const last = Math.min(8, data.length - 5);
  for (let i = 3; i <= last; i++) {
    if (data[i] !== 0x20) continue;
    return data[i + 1] === 0x2f && data[i + 2] === 0x6c && data[i + 3] === 0x62 && data[i + 4] === 0x2f;
  }
  return false;
}

/** Whether the request whose head is `data[0, headEnd)` might address an LB endpoint by an `*.lb.localhost` host. Pure. */
export function lbByHost(data: Buffer, headEnd: number): boolean {
  const host = data.indexOf(LB_HOST);
  return host > 0 && host < headEnd;
}

const POST_V2 = Buffer.from("POST /v2/", "latin1");
const POST_TAKE = Buffer.from("POST /_worker/v1/take ", "latin1");
export const TAKE_PATH = "/_worker/v1/take";
const GET_V2 = Buffer.from("GET /v2/", "latin1");
export const RUN_PATH = /^\/v2\/([A-Za-z0-9_-]+)\/run$/;
export const READ_PATH = /^\/v2\/([A-Za-z0-9_-]+)\/(?:health|status\/([A-Za-z0-9_-]+))$/;

/** (Byte by byte: for prefixes this short, cheaper than a call into node's compare.) */
function startsWith(data: Buffer, prefix: Buffer): boolean {
  if (data.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[i] !== prefix[i]) return false;
  return true;
}

/** Whether the request that starts `data` might be a job `/run` (a POST under /v2/). Pure. */
export function mayBeRun(data: Buffer): boolean {
  return startsWith(data, POST_V2);
}

/** Whether the request that starts `data` might be a worker's take. Pure. */
export function mayBeTake(data: Buffer): boolean {
  return startsWith(data, POST_TAKE);
}

const GET_PROVIDER = Buffer.from("GET /_worker/provider/v2/", "latin1");
const POST_PROVIDER = Buffer.from("POST /_worker/provider/v2/", "latin1");

/** Whether the request that starts `data` might be a provider worker's take or job-done (wire/provider-worker.ts). Pure. */
export function mayBeProviderCall(data: Buffer): boolean {
  return startsWith(data, GET_PROVIDER) || startsWith(data, POST_PROVIDER);
}

/** Whether the request that starts `data` might be a job API read (a GET under /v2/). Pure. */
export function mayBeRead(data: Buffer): boolean {
  return startsWith(data, GET_V2);
}
