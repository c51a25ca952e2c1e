import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { JOBS_REPLICA_HEADER, WorkerApi } from "./api.js";

interface Replica {
  url: string;
  calls: string[];
  server: Server;
}

/** A replica answering every worker call with `{ served: <name> }`, naming `jobsReplica()` when it returns one. */
async function replica(name: string, jobsReplica: () => string | undefined = () => undefined): Promise<Replica> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    calls.push(req.url ?? "");
    req.resume();
    req.on("end", () => {
      const named = jobsReplica();
      res.writeHead(200, { "content-type": "application/json", ...(named ? { [JOBS_REPLICA_HEADER]: named } : {}) });
      res.end(JSON.stringify({ served: name }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, server };
}

const open: Array<Server | WorkerApi> = [];
afterEach(async () => {
  for (const item of open.splice(0)) {
    if (item instanceof WorkerApi) item.close();
    else await new Promise((resolve) => item.close(resolve));
  }
});

describe("WorkerApi and the jobs replica's address", () => {
  it("talks to the replica a forwarding replica named, from the next call on", async () => {
    const jobs = await replica("jobs");
    const follower = await replica("follower", () => jobs.url);
    open.push(jobs.server, follower.server);
    const api = new WorkerApi(follower.url, "token");
    open.push(api);

    expect(await api.post("take", {})).toEqual({ served: "follower" });
    expect(await api.post("done", {})).toEqual({ served: "jobs" });
    expect(await api.post("take", {})).toEqual({ served: "jobs" });
    expect(jobs.calls).toEqual(["/_worker/v1/done", "/_worker/v1/take"]);
    expect(api.currentUrl).toBe(jobs.url);
  });

  it("goes back to the configured address when the named replica cannot be reached, and stays there a while", async () => {
    const gone = await replica("gone");
    const goneUrl = gone.url;
    await new Promise((resolve) => gone.server.close(resolve));
    const follower = await replica("follower", () => goneUrl);
    open.push(follower.server);
    const api = new WorkerApi(follower.url, "token");
    open.push(api);

    expect(await api.post("take", {})).toEqual({ served: "follower" });
    await expect(api.post("take", {})).rejects.toThrow(/ECONNREFUSED/);
    // The retry (the worker loop retries a network failure) goes through the configured address, and the name
    // given again is not followed for a while.
    expect(await api.post("take", {})).toEqual({ served: "follower" });
    expect(await api.post("take", {})).toEqual({ served: "follower" });
    expect(api.currentUrl).toBe(`${follower.url}/`);
  });

  it("ignores a name of another scheme or that is no address", async () => {
    let named = "https://127.0.0.1:1";
    const follower = await replica("follower", () => named);
    open.push(follower.server);
    const api = new WorkerApi(follower.url, "token");
    open.push(api);
    await api.post("take", {});
    expect(await api.post("take", {})).toEqual({ served: "follower" });
    named = "not a url";
    await api.post("take", {});
    expect(await api.post("take", {})).toEqual({ served: "follower" });
  });
});
