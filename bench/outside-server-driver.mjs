// A worker driver for the benches that starts nothing: each "worker" of a load-balanced endpoint is an HTTP
// server already running (`upstream`), which the driver registers with the service under the worker's id and
// token, as the svc runtime would, and keeps alive with heartbeats. So the service's proxy sends its traffic to
// the very server nginx and HAProxy proxy to in bench/peers-lb.bench.mjs, over TCP as they do: the comparison is
// between the proxies, not between svc's route runtime and a plain server.
//
// The server answers every request (the service's /ping with its credential included) with 200, so the worker
// becomes ready at once. The driver's `address` for the worker is `upstream`, which the service prefers to the
// registered one (docs/lb.md, "Worker credentials").
export function createOutsideServerDriver(upstream) {
  const running = new Set();
  return {
    name: "process",
    async start(launch) {
      let stopped = false;
      let resolveExit;
      const exited = new Promise((resolve) => (resolveExit = resolve));
      const call = async (path, body) => {
        const res = await fetch(`${launch.apiUrl}/_worker/v1/${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${launch.workerToken}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const text = await res.text();
        if (!res.ok) throw new Error(`${path}: ${res.status} ${text.slice(0, 200)}`);
        return JSON.parse(text);
      };
      // Registered after start() returns, as a real worker does once its process runs.
      const life = (async () => {
        const registered = await call("register", { workerId: launch.workerId, concurrency: launch.maxConcurrency, address: upstream });
        while (!stopped) {
          await new Promise((r) => setTimeout(r, registered.heartbeatMs ?? 5000).unref());
          if (!stopped) await call("heartbeat", { workerId: launch.workerId, leases: [], state: "idle" }).catch(() => undefined);
        }
      })().catch((err) => launch.onLog({ ts: Date.now(), stream: "log", text: `outside-server driver: ${err.message}` }));
      const end = () => {
        stopped = true;
        running.delete(handle);
        resolveExit({ code: 0, signal: null });
        return exited;
      };
      const handle = { workerId: launch.workerId, exited, address: upstream, stop: async () => end(), kill: () => void end(), life };
      running.add(handle);
      return handle;
    },
    async close() {
      for (const handle of [...running]) await handle.stop();
    },
  };
}
