import { expect, it } from "vitest";
import { consoleFile } from "./console.js";
import { jobSummary } from "../jobs/list.js";
import type { JobRow } from "../store/types.js";

it("maps console paths to files: the page for app routes, plain names for assets, nothing outside", () => {
  expect(consoleFile("/console/")).toBe("index.html");
  expect(consoleFile("/console/endpoints")).toBe("index.html");
  expect(consoleFile("/console/main-ABC.js")).toBe("main-ABC.js");
  expect(consoleFile("/console/../package.json")).toBeUndefined();
  expect(consoleFile("/console/a/b.js")).toBeUndefined();
  expect(consoleFile("/consoles/x.js")).toBeUndefined();
  expect(consoleFile("/v2/x/run")).toBeUndefined();
});

const row = (over: Partial<JobRow>): JobRow =>
  ({
    id: "j1",
    endpointId: "e",
    status: "IN_QUEUE",
    input: '{"a":1}',
    function: null,
    createdAt: 1000,
    startedAt: null,
    completedAt: null,
    output: null,
    error: null,
    errorType: null,
    errorStack: null,
    retried: 0,
    attempt: 0,
    workerId: null,
    ...over,
  }) as JobRow;

it("summarises a job with the job record's delay and execution times", () => {
  expect(jobSummary(row({}), 1500)).toEqual({
    id: "j1",
    status: "IN_QUEUE",
    createdAt: 1000,
    delayTime: 500,
    executionTime: 0,
    function: null,
    input: { a: 1 },
    startedAt: null,
    completedAt: null,
    workerId: null,
    attempts: 0,
  });
  expect(jobSummary(row({ status: "FAILED", startedAt: 1200, completedAt: 1700, error: "boom", retried: 1 }), 9000)).toMatchObject({
    delayTime: 200,
    executionTime: 500,
    error: "boom",
    retries: 1,
  });
  expect(jobSummary(row({ input: JSON.stringify("x".repeat(70_000)) }), 1000)).toMatchObject({ inputOmitted: true });
  expect(jobSummary(row({ input: JSON.stringify("x".repeat(70_000)) }), 1000)).not.toHaveProperty("input");
});
