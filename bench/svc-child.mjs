// svc's service in a process of its own, as a deployed service runs, for the peers benches: nginx, HAProxy, Redis
// and PostgreSQL are processes of their own too, and nothing the bench's own process did before (other benches'
// services, timers, compiled code) then runs or lingers beside the service measured. Prints the endpoint's URL on
// stdout once it answers; stops with stdin.
//
//   node bench/svc-child.mjs lb <upstream URL>      an LB endpoint in front of that server (svc-service.mjs)
//   node bench/svc-child.mjs queue [store URL]      the queue bench's endpoint, on SQLite or that PostgreSQL
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSvcLb, startSvcQueue } from "./svc-service.mjs";

const [kind, arg] = process.argv.slice(2);
const work = mkdtempSync(join(tmpdir(), "svc-bench-child-"));
let service;
const stop = async (code) => {
  await service?.close();
  rmSync(work, { recursive: true, force: true });
  process.exit(code);
};
process.stdin.on("end", () => void stop(0));
process.stdin.resume();
try {
  if (kind !== "lb" && kind !== "queue") throw new Error(`unknown kind ${kind}: lb <upstream> or queue [store URL]`);
  const started = kind === "lb" ? await startSvcLb(arg, work) : await startSvcQueue(work, { storeUrl: arg });
  service = started.service;
  process.stdout.write(`${started.url}\n`);
} catch (err) {
  process.stderr.write(`svc-child: ${err.stack ?? err}\n`);
  await stop(1);
}
