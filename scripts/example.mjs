#!/usr/bin/env node
// The quick start's main job: build examples/hello, start the local service with process workers (what
// `svc dev` does), and call each endpoint through the real job API, printing what comes back.
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { startDevSession } from "../dist/dev/session.js";
import { JobsClient } from "svc";

const root = join(fileURLToPath(new URL("..", import.meta.url)), "examples", "hello");
const log = (s) => process.stdout.write(`${s}\n`);

log(`Building ${root} and starting a local svc service...`);
const session = await startDevSession({ root, port: 0, watch: false });
try {
  log(`Service: ${session.url}   (app ${session.app}, environment dev)`);
  for (const e of session.endpoints) log(`  ${e.name.padEnd(10)} ${e.url}`);
  const client = (name) => new JobsClient(session.endpoints.find((e) => e.name === name).url, session.apiKey);

  log("\nPOST /runsync to hello (a cold start: the first worker starts now):");
  const started = Date.now();
  const record = await client("hello").runsync({ name: "world" });
  log(`  ${record.status} in ${Date.now() - started} ms: ${JSON.stringify(record.output)}`);
  log(`  delayTime ${record.delayTime} ms, executionTime ${record.executionTime} ms`);

  log("\nPOST /run to countdown, then GET /stream until it ends:");
  const jobs = client("countdown");
  const { id } = await jobs.run({ from: 3 });
  for (;;) {
    const { status, stream } = await jobs.stream(id);
    for (const chunk of stream) log(`  chunk ${JSON.stringify(chunk.output)}`);
    if (["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(status)) {
      log(`  ${status}`);
      break;
    }
  }

  log("\nTwo calls to the class endpoint words (one instance per worker keeps state):");
  for (const text of ["to be or not", "to be"]) {
    const r = await client("words").runsync({ text }, { function: "count" });
    log(`  ${JSON.stringify(text)} -> ${JSON.stringify(r.output)}`);
  }
  log("\nHealth of hello:");
  log(`  ${JSON.stringify(await client("hello").health())}`);
} finally {
  await session.close();
}
log("\nDone. Run `npx svc dev -C examples/hello` to keep a session running.");
