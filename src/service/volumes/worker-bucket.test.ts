import { describe, expect, it } from "vitest";
import { isWorkerBucketKey, presignedReadOutlivesRevocation, workerBucketEndpoint, workerBucketKeyId } from "./worker-bucket.js";

describe("a worker's S3 key", () => {
  it("has an id of AWS's shape derived from the worker's id, and its volume's path as endpoint", () => {
    expect(workerBucketKeyId("w1")).toMatch(/^SVCW[A-Z2-7]{16}$/);
    expect(workerBucketKeyId("w1")).toBe(workerBucketKeyId("w1"));
    expect(workerBucketKeyId("w1")).not.toBe(workerBucketKeyId("w2"));
    expect(workerBucketEndpoint("https://svc.test/s3/", "vol1")).toBe("https://svc.test/s3/vol1");
  });

  it("is told apart from a user's key by its id, not its name alone", () => {
    const id = workerBucketKeyId("w1");
    expect(isWorkerBucketKey({ id, name: "worker w1 of render" })).toBe(true);
    expect(isWorkerBucketKey({ id: "SVCABCDEFGHIJKLMNOPQ", name: "worker w1 of render" })).toBe(false);
    expect(isWorkerBucketKey({ id, name: null })).toBe(false);
  });

  it("once revoked, answers only presigned GET and HEAD signed before the revocation", () => {
    const key = { id: workerBucketKeyId("w1"), name: "worker w1 of render", revokedAt: 2_000 };
    const before = { form: "query" as const, date: new Date(1_000) };
    expect(presignedReadOutlivesRevocation(key, before, "GET")).toBe(true);
    expect(presignedReadOutlivesRevocation(key, before, "HEAD")).toBe(true);
    expect(presignedReadOutlivesRevocation(key, before, "PUT")).toBe(false);
    expect(presignedReadOutlivesRevocation(key, { form: "header", date: new Date(1_000) }, "GET")).toBe(false);
    expect(presignedReadOutlivesRevocation(key, { form: "query", date: new Date(3_000) }, "GET")).toBe(false);
    expect(presignedReadOutlivesRevocation({ ...key, id: "SVCABCDEFGHIJKLMNOPQ" }, before, "GET")).toBe(false);
    expect(presignedReadOutlivesRevocation({ ...key, revokedAt: null }, before, "GET")).toBe(false);
  });
});
