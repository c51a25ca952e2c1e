// The plain loopback server (http.mjs) in a process of its own, as every server a client talks to is: a round
// trip to it crosses processes, as a round trip to a replica does. Prints its URL on stdout; ends with stdin.
import { startPlainServer } from "./http.mjs";

const { url } = await startPlainServer();
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
process.stdout.write(`${url}\n`);
