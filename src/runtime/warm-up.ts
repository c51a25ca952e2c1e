// A pre-booted runtime's warm-up (worker.ts, before it says it is ready; docs/cold-start.md).

import { stat } from "node:fs/promises";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * What a pre-booted runtime does before it says it is ready, so that a claim does not pay for it: Node sets up its
 * file-system thread pool, its ES module loader and source-map support the first time each is used, and a claimed
 * runtime used all three on its way to its first job (reading the manifest, importing the handler): measured
 * ~10 ms of a ~40 ms cold start here. Nothing of a user's is touched.
 */
export async function warmUp(): Promise<void> {
  process.setSourceMapsEnabled(true);
  // Failures here only mean the claim pays for these later, as without a warm-up.
  await stat(process.execPath).catch(() => undefined);
  const emptyModule = "data:text/javascript,export default 0";
  await import(emptyModule).catch(() => undefined);
  // The first HTTP exchange of a process costs ~6 ms more than the next (Node loads and compiles its client and
  // parser then): one with itself on loopback, so that the claimed worker's `register` is not that first one.
  await new Promise<void>((resolve) => {
    const server = createServer((_req, res) => res.end("{}"));
    server.once("error", () => resolve());
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/", agent: false, headers: { "content-type": "application/json" } }, (res) => {
        res.resume();
        res.once("end", () => server.close(() => resolve()));
      });
      req.once("error", () => server.close(() => resolve()));
      req.end("{}");
    });
  });
}
