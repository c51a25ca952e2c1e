import { describe, expect, it } from "vitest";
import { UserError } from "../errors.js";
import { readWorkerEnv } from "./env.js";

const complete = {
  SVC_API_URL: "http://127.0.0.1:8600/",
  SVC_WORKER_ID: "w1",
  SVC_WORKER_TOKEN: "tok",
  SVC_ENDPOINT_ID: "ep1",
  SVC_ENDPOINT_NAME: "fns",
  SVC_ARTIFACT: "/tmp/a.tar.gz",
};

describe("readWorkerEnv", () => {
  it("reads the launch environment with defaults", () => {
    const s = readWorkerEnv({ ...complete, SVC_MAX_CONCURRENCY: "4", SVC_APP: "app", SVC_ENV: "dev", SVC_PARENT_PID: "42" });
    expect(s).toMatchObject({ apiUrl: "http://127.0.0.1:8600", workerId: "w1", maxConcurrency: 4, app: "app", env: "dev", parentPid: 42 });
    expect(readWorkerEnv(complete).maxConcurrency).toBe(1);
    expect(readWorkerEnv(complete).parentPid).toBeUndefined();
  });

  it("lists every problem at once", () => {
    const err = (() => {
      try {
        readWorkerEnv({ SVC_API_URL: "ftp://x", SVC_MAX_CONCURRENCY: "0" });
      } catch (e) {
        return e;
      }
    })() as UserError;
    expect(err).toBeInstanceOf(UserError);
    expect(err.problems).toEqual(
      expect.arrayContaining([
        "SVC_WORKER_ID is not set",
        "SVC_WORKER_TOKEN is not set",
        'SVC_MAX_CONCURRENCY must be a positive integer (got "0")',
        "one of SVC_ARTIFACT or SVC_ARTIFACT_DIR must be set",
        'SVC_API_URL must be an http(s) URL (got "ftp://x")',
      ]),
    );
  });
});
