import { describe, expect, it } from "vitest";
import {
  PROVIDER_ROUTES,
  providerError,
  providerIsStream,
  providerPingJobIds,
  providerResult,
  providerStopAnswer,
  providerStreamChunk,
  providerTakeAnswer,
  providerTakeQuery,
  providerUrlTemplates,
  providerWorkerCall,
} from "./provider-worker.js";
import { applyProtocolEnv } from "../drivers/env.js";
import { providerWorkerEnv } from "../drivers/provider-env.js";
import type { WorkerLaunch } from "../drivers/types.js";

/** What the SDK does to the templates it is given (rp_job.py, rp_http.py, rp_ping.py). */
function asTheSdkDoes(env: Record<string, string>, jobId: string) {
  const workerId = env.RUNPOD_POD_ID!;
  const take = env.RUNPOD_WEBHOOK_GET_JOB!.replace("$ID", workerId);
  const done = env.RUNPOD_WEBHOOK_POST_OUTPUT!.replace("$RUNPOD_POD_ID", workerId).replace("$ID", jobId) + "&isStream=false";
  const stream = env.RUNPOD_WEBHOOK_POST_STREAM!.replace("$RUNPOD_POD_ID", workerId).replace("$ID", jobId) + "&isStream=false";
  return {
    take: take + "&job_in_progress=0",
    batch: take.replace("/job-take/", "/job-take-batch/") + "&batch_size=3&job_in_progress=1",
    stop: take.replace("/job-take/", "/job-stop/"),
    done,
    stream,
    ping: env.RUNPOD_WEBHOOK_PING!.replace("$RUNPOD_POD_ID", workerId),
  };
}

/** The route pattern a path matches, with its parameters (as the service's router reads patterns). */
function routeOf(url: string): { route: string; params: Record<string, string> } | undefined {
  const segments = new URL(url).pathname.split("/").filter(Boolean);
  for (const [route, pattern] of Object.entries(PROVIDER_ROUTES)) {
    const parts = pattern.split("/").filter(Boolean);
    if (parts.length !== segments.length) continue;
    const params: Record<string, string> = {};
    if (parts.every((p, i) => (p.startsWith(":") ? ((params[p.slice(1)] = decodeURIComponent(segments[i]!)), true) : p === segments[i])))
      return { route, params };
  }
  return undefined;
}

describe("the variables and URL templates", () => {
  const env = providerWorkerEnv({ apiUrl: "http://10.0.0.2:8080/", workerId: "w1", endpointId: "ep1", workerToken: "svcw_secret", pingIntervalMs: 2500 });

  it("give the SDK every variable it reads, with its start-up checks off and the key bare", () => {
    expect(env).toMatchObject({
      RUNPOD_AI_API_KEY: "svcw_secret",
      RUNPOD_POD_ID: "w1",
      RUNPOD_ENDPOINT_ID: "ep1",
      RUNPOD_POD_HOSTNAME: "w1",
      RUNPOD_PING_INTERVAL: "2500",
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
      RUNPOD_SKIP_GPU_CHECK: "true",
    });
    // The SDK appends `&...` to each: each already has a query.
    for (const key of ["RUNPOD_WEBHOOK_GET_JOB", "RUNPOD_WEBHOOK_POST_OUTPUT", "RUNPOD_WEBHOOK_POST_STREAM", "RUNPOD_WEBHOOK_PING"]) {
      expect(env[key]).toContain("?");
      expect(env[key]!.startsWith("http://10.0.0.2:8080/_worker/provider/v2/ep1/")).toBe(true);
    }
    // The SDK reads the ping period in whole seconds (ms // 1000): never below one.
    expect(providerWorkerEnv({ apiUrl: "http://s", workerId: "w", endpointId: "e", workerToken: "k", pingIntervalMs: 150 }).RUNPOD_PING_INTERVAL).toBe("1000");
  });

  it("become, substituted as the SDK does, the service's routes for this worker and job", () => {
    const urls = asTheSdkDoes(env, "job-9");
    expect(routeOf(urls.take)).toEqual({ route: "take", params: { endpoint: "ep1", worker: "w1" } });
    expect(routeOf(urls.batch)).toEqual({ route: "takeBatch", params: { endpoint: "ep1", worker: "w1" } });
    expect(routeOf(urls.stop)).toEqual({ route: "stop", params: { endpoint: "ep1", worker: "w1" } });
    expect(routeOf(urls.done)).toEqual({ route: "done", params: { endpoint: "ep1", worker: "w1", job: "job-9" } });
    expect(routeOf(urls.stream)).toEqual({ route: "stream", params: { endpoint: "ep1", worker: "w1", job: "job-9" } });
    expect(routeOf(urls.ping)).toEqual({ route: "ping", params: { endpoint: "ep1", worker: "w1" } });
    const batchQuery = new URL(urls.batch).searchParams;
    expect(providerTakeQuery(batchQuery, true, [])).toEqual({ max: 3, jobInProgress: true });
    expect(providerIsStream(new URL(urls.done).searchParams, [])).toBe(false);
  });

  it("are read from a request's method and target as the router reads them (the service's fast path reads them so)", () => {
    const urls = asTheSdkDoes(env, "job-9");
    const target = (url: string) => {
      const u = new URL(url);
      return u.pathname + u.search;
    };
    for (const [name, method] of [
      ["take", "GET"],
      ["batch", "GET"],
      ["stop", "GET"],
      ["ping", "GET"],
      ["done", "POST"],
      ["stream", "POST"],
    ] as const) {
      const url = urls[name];
      const route = routeOf(url)!;
      expect(providerWorkerCall(method, target(url))).toEqual({
        route: route.route,
        endpointId: route.params.endpoint,
        workerId: route.params.worker,
        ...(route.params.job ? { jobId: route.params.job } : {}),
        query: new URL(url).search.slice(1),
      });
    }
    // The wrong method, a job where none goes or none where one does, ids the router would decode, other routes.
    expect(providerWorkerCall("POST", target(urls.take))).toBeUndefined();
    expect(providerWorkerCall("GET", target(urls.done))).toBeUndefined();
    expect(providerWorkerCall("POST", "/_worker/provider/v2/ep1/job-done/w1?isStream=false")).toBeUndefined();
    expect(providerWorkerCall("GET", "/_worker/provider/v2/ep1/job-take/w1/job-9?x=1")).toBeUndefined();
    expect(providerWorkerCall("GET", "/_worker/provider/v2/ep%31/job-take/w1?x=1")).toBeUndefined();
    expect(providerWorkerCall("GET", "/_worker/provider/v2/ep1/job-taken/w1?x=1")).toBeUndefined();
    expect(providerWorkerCall("GET", "/_worker/provider/v2/ep1/job-take/w1")).toMatchObject({ route: "take", query: "" });
  });

  it("are what a driver gives a worker launched with protocol provider, in place of svc's own", () => {
    const launch = { workerId: "w1", endpointId: "ep1", workerToken: "svcw_t", maxConcurrency: 2, protocol: "provider", heartbeatMs: 3000 } as WorkerLaunch;
    const given: Record<string, string | undefined> = { USER_SETTING: "x", RUNPOD_POD_ID: "forged", SVC_WORKER_TOKEN: "forged" };
    applyProtocolEnv(given, launch, { apiUrl: "http://host:1", artifact: "/a.tgz" });
    expect(given).toMatchObject({ USER_SETTING: "x", RUNPOD_POD_ID: "w1", RUNPOD_AI_API_KEY: "svcw_t", RUNPOD_PING_INTERVAL: "3000" });
    expect(Object.keys(given).filter((k) => k.startsWith("SVC_"))).toEqual([]);
    const svc: Record<string, string | undefined> = {};
    applyProtocolEnv(svc, { ...launch, protocol: "svc" }, { apiUrl: "http://host:1", artifact: "/a.tgz" });
    expect(svc).toMatchObject({ SVC_WORKER_ID: "w1", SVC_WORKER_TOKEN: "svcw_t" });
    expect(svc.RUNPOD_WEBHOOK_GET_JOB).toBeUndefined();
  });

  it("name the endpoint once, escaped", () => {
    expect(providerUrlTemplates("http://s", "a b").getJob).toBe("http://s/_worker/provider/v2/a%20b/job-take/$ID?protocol=provider");
  });
});

describe("the take query", () => {
  it("reads batch_size on job-take-batch only, and job_in_progress as 0 or 1", () => {
    expect(providerTakeQuery(new URLSearchParams("job_in_progress=0"), false, [])).toEqual({ max: 1, jobInProgress: false });
    expect(providerTakeQuery(new URLSearchParams(""), false, [])).toEqual({ max: 1, jobInProgress: undefined });
    expect(providerTakeQuery(new URLSearchParams("batch_size=5"), false, [])).toEqual({ max: 1, jobInProgress: undefined });
    for (const bad of ["batch_size=0", "batch_size=1001", "batch_size=2.5", "batch_size=x", ""]) {
      const errors: string[] = [];
      providerTakeQuery(new URLSearchParams(bad), true, errors);
      expect(errors, bad).toEqual(["batch_size: must be an integer from 1 to 1000"]);
    }
    const errors: string[] = [];
    providerTakeQuery(new URLSearchParams("job_in_progress=yes"), false, errors);
    expect(errors).toEqual(["job_in_progress: must be 0 or 1"]);
  });

  it("answers one job as an object on job-take and a list on job-take-batch, the input spliced as stored", () => {
    expect(JSON.parse(providerTakeAnswer([{ id: "j1", input: '{"a":1}' }], false))).toEqual({ id: "j1", input: { a: 1 } });
    expect(
      JSON.parse(
        providerTakeAnswer(
          [
            { id: "j1", input: "1" },
            { id: "j2", input: '"x"' },
          ],
          true,
        ),
      ),
    ).toEqual([
      { id: "j1", input: 1 },
      { id: "j2", input: "x" },
    ]);
    // A job whose submission named a bucket carries its s3Config; the others none.
    const s3Config = { accessId: "SVCW1", accessSecret: "s", bucketName: "vol1", endpointUrl: "http://h/s3" };
    expect(
      JSON.parse(
        providerTakeAnswer(
          [
            { id: "j1", input: "1" },
            { id: "j2", input: "2" },
          ],
          true,
          new Map([["j2", s3Config]]),
        ),
      ),
    ).toEqual([
      { id: "j1", input: 1 },
      { id: "j2", input: 2, s3Config },
    ]);
    expect(JSON.parse(providerStopAnswer(["j1"]))).toEqual({ jobsToStop: ["j1"] });
  });
});

describe("job-done bodies", () => {
  const read = (body: unknown) => {
    const errors: string[] = [];
    const result = providerResult(body, errors);
    return { result, errors };
  };

  it("output completes; no output (the SDK drops an empty dict) completes with none", () => {
    expect(read({ output: { text: "hi" } })).toEqual({ result: { kind: "completed", output: { text: "hi" }, stopPod: false }, errors: [] });
    expect(read({ output: null })).toEqual({ result: { kind: "completed", output: null, stopPod: false }, errors: [] });
    expect(read({})).toEqual({ result: { kind: "completed", stopPod: false }, errors: [] });
    expect(read({ output: [1, 2], stopPod: true }).result).toEqual({ kind: "completed", output: [1, 2], stopPod: true });
  });

  it("the SDK's error report fails the job, kept as sent, with its type and traceback read", () => {
    const report = JSON.stringify({
      error_type: "<class 'ValueError'>",
      error_message: "bad",
      error_traceback: "Traceback ...",
      hostname: "h",
      worker_id: "w",
      runpod_version: "1",
    });
    expect(read({ error: report }).result).toEqual({
      kind: "failed",
      error: { message: report, type: "<class 'ValueError'>", stack: "Traceback ..." },
      stopPod: false,
    });
    // A handler dict's error keeps its output; an error that is not text is recorded as JSON.
    expect(read({ output: { partial: 1 }, error: "half done" }).result).toEqual({
      kind: "failed",
      error: { message: "half done" },
      output: { partial: 1 },
      stopPod: false,
    });
    expect(providerError({ code: 3 })).toEqual({ message: '{"code":3}' });
    expect(providerError("[1]")).toEqual({ message: "[1]" });
    // As the SDK, a falsy error is none.
    expect(read({ output: 1, error: "" }).result.kind).toBe("completed");
    expect(read({ output: 1, error: null }).result.kind).toBe("completed");
  });

  it("a progress update is status IN_PROGRESS with its progress as output", () => {
    expect(read({ status: "IN_PROGRESS", output: { percent: 50 } })).toEqual({ result: { kind: "progress", progress: { percent: 50 } }, errors: [] });
    expect(read({ status: "IN_PROGRESS" }).errors).toEqual(["$.output: a progress update carries its progress as output"]);
    expect(read({ status: "COMPLETED", output: 1 }).errors).toEqual(['$.status: only "IN_PROGRESS" (a progress update) may be sent']);
  });

  it("refuses what the SDK never sends", () => {
    expect(read([1]).errors).toEqual(["$: must be an object"]);
    expect(read("text").errors).toEqual(["$: must be an object"]);
    expect(read(undefined).errors).toEqual(["$: must be an object"]);
    expect(read({ output: 1, stopPod: "yes" }).errors).toEqual(["$.stopPod: must be a boolean"]);
  });

  it("isStream is true or false", () => {
    expect(providerIsStream(new URLSearchParams("isStream=true"), [])).toBe(true);
    expect(providerIsStream(new URLSearchParams(""), [])).toBe(false);
    const errors: string[] = [];
    providerIsStream(new URLSearchParams("isStream=1"), errors);
    expect(errors).toEqual(["isStream: must be true or false"]);
  });
});

describe("stream chunks and pings", () => {
  it("a chunk is {output}", () => {
    expect(providerStreamChunk({ output: "tok" }, [])).toEqual({ output: "tok" });
    const errors: string[] = [];
    providerStreamChunk({ text: "tok" }, errors);
    expect(errors).toEqual(["$.output: is required"]);
  });

  it("a ping's job ids come comma-separated (or repeated), blanks and repeats dropped", () => {
    expect(providerPingJobIds(new URLSearchParams("job_id=a,b,,a&runpod_version=1.12.0"))).toEqual(["a", "b"]);
    expect(providerPingJobIds(new URLSearchParams("job_id=a&job_id=c"))).toEqual(["a", "c"]);
    expect(providerPingJobIds(new URLSearchParams("runpod_version=1"))).toEqual([]);
  });
});
