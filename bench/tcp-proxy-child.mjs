// The round-robin proxy (tcp-proxy.mjs) in a process of its own, as a load balancer in front of replicas is:
// the bench's load client and the proxy then do not share one event loop. It prints its URL on stdout and
// reads the replicas' ports as JSON arrays, one line each, on stdin (the latest line wins).
import { createInterface } from "node:readline";
import { roundRobin } from "./tcp-proxy.mjs";

let ports = [];
createInterface({ input: process.stdin }).on("line", (line) => {
  ports = JSON.parse(line);
});
process.stdin.on("end", () => process.exit(0));
const { url } = await roundRobin(() => ports);
process.stdout.write(`${url}\n`);
