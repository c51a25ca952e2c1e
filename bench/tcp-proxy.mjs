// A round-robin TCP proxy over local ports, as a load balancer in front of service replicas would be: each new
// connection goes to the next port; a port that refuses the connection is skipped. Written for the cluster test
// and bench (test/cluster/three-replicas.test.ts, bench/cluster.bench.mjs).
import { connect, createServer } from "node:net";

/** `ports()` is asked on every connection (replicas come and go). Resolves to { server, url }. */
export function roundRobin(ports) {
  let next = 0;
  const server = createServer((client) => {
    client.pause();
    const candidates = ports();
    const attempt = (left) => {
      if (left === 0) return client.destroy();
      const port = candidates[next++ % candidates.length];
      const upstream = connect(port, "127.0.0.1");
      upstream.setNoDelay(true);
      upstream.once("connect", () => {
        upstream.pipe(client);
        client.pipe(upstream);
        client.resume();
      });
      upstream.once("error", () => {
        if (upstream.bytesRead === 0 && upstream.bytesWritten === 0) attempt(left - 1);
        else client.destroy();
      });
      client.once("error", () => upstream.destroy());
      client.once("close", () => upstream.destroy());
      upstream.once("close", () => client.destroy());
    };
    client.setNoDelay(true);
    attempt(candidates.length);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` })));
}
