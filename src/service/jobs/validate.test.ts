import { describe, expect, it } from "vitest";
import { validateSubmission } from "./validate.js";
import { credentialFromHeader } from "../http/wire.js";

const keyFromHeader = (header: string | undefined) => credentialFromHeader(header)?.key;
import { splitChunk } from "../engine/index.js";
import { planDeploy, endpointId } from "../index.js";

describe("validateSubmission", () => {
  it("accepts input of any JSON type with optional function, webhook and policy", () => {
    expect(validateSubmission({ input: "text" }, [])).toEqual({ value: { input: "text" }, errors: [] });
    const full = validateSubmission(
      {
        input: {},
        function: "a",
        webhook: "https://x.test/h",
        policy: { executionTimeout: 5000, ttl: 60000, lowPriority: true },
        s3Config: { bucketName: "vol1" },
      },
      ["a", "b"],
      undefined,
      () => ["vol1"],
    );
    expect(full.errors).toEqual([]);
    // The caller's volumes are read from the store only for a body that names an s3Config.
    let asked = 0;
    validateSubmission({ input: {} }, [], undefined, () => (asked++, ["vol1"]));
    expect(asked).toBe(0);
    expect(full.value).toEqual({
      input: {},
      function: "a",
      webhook: "https://x.test/h",
      executionTimeoutMs: 5000,
      lifetimeMs: 60000,
      lowPriority: true,
      s3Bucket: "vol1",
    });
  });

  it("lists every problem as `$.path: message`", () => {
    expect(validateSubmission([], []).errors).toEqual(['$: must be a JSON object like {"input": {...}}']);
    const { value, errors } = validateSubmission({ extra: 1, function: "zz", webhook: "ftp://x", policy: { ttl: -1, lowPriority: "yes", other: 1 } }, ["a"]);
    expect(value).toBeUndefined();
    // The RunRequest schema's findings first (required, then members in its order, then unknown ones), then the
    // endpoint's own rules.
    expect(errors).toEqual([
      "$.input: is required",
      "$.policy.ttl: must be at least 1",
      "$.policy.lowPriority: must be a boolean",
      "$.policy.other: unknown property",
      "$.extra: unknown property",
      '$.function: the endpoint has no function "zz" (it serves: a)',
      "$.webhook: must be an http(s) URL",
    ]);
  });
});

describe("validateSubmission: s3Config", () => {
  it("takes an s3Config whose bucket is one of the owner's volumes, and refuses any other bucket or shape", () => {
    const ok = { accessId: "SVCA", accessSecret: "s", bucketName: "vol1", endpointUrl: "https://svc.test/s3" };
    expect(validateSubmission({ input: {}, s3Config: ok }, [], undefined, () => ["vol1"]).errors).toEqual([]);
    expect(validateSubmission({ input: {}, s3Config: { ...ok, bucketName: "vol2" } }, [], undefined, () => ["vol1"]).errors).toEqual([
      "$.s3Config.bucketName: \"vol2\" is not one of your network volumes: name one by its id (svc volume list); svc's workers upload to svc's own S3 API only",
    ]);
    expect(validateSubmission({ input: {}, s3Config: { accessId: 1 } }, [], undefined, () => ["vol1"]).errors).toEqual([
      "$.s3Config.accessId: must be a string",
      "$.s3Config.bucketName: is required: the id of one of your network volumes (svc volume list), the bucket of svc's S3 API",
    ]);
    expect(validateSubmission({ input: {}, s3Config: "x" }, []).errors).toEqual([
      "$.s3Config: must be an object {accessId, accessSecret, bucketName, endpointUrl}",
    ]);
  });
});

describe("validateSubmission: webhook events", () => {
  it("takes the events a webhook gets (svc's addition), once each, and refuses unknown ones or events without a webhook", () => {
    expect(validateSubmission({ input: {}, webhook: "https://x.test/h", webhookEvents: ["started", "completed", "started"] }, []).value).toEqual({
      input: {},
      webhook: "https://x.test/h",
      webhookEvents: ["started", "completed"],
    });
    expect(validateSubmission({ input: {}, webhook: "https://x.test/h", webhookEvents: ["finished"] }, []).errors).toEqual([
      "$.webhookEvents[0]: must be one of started, progress, completed, failed",
    ]);
    expect(validateSubmission({ input: {}, webhookEvents: ["failed"] }, []).errors).toEqual(["$.webhookEvents: names events of a webhook; send webhook too"]);
  });
});

describe("validateSubmission: where the webhook goes", () => {
  it("refuses a webhook (or webhookV2) the address rules refuse from its URL, naming the rule; accepts the rest", () => {
    const rules = (url: string) =>
      new URL(url).hostname === "127.0.0.1"
        ? { rule: "loopback" as const, message: 'refused by the webhook rule "loopback": 127.0.0.1 is a loopback address' }
        : undefined;
    expect(validateSubmission({ input: {}, webhook: "http://2130706433/h" }, [], rules)).toEqual({
      errors: ['$.webhook: refused by the webhook rule "loopback": 127.0.0.1 is a loopback address'],
      webhookRule: "loopback",
    });
    expect(validateSubmission({ input: {}, webhookV2: "http://127.0.0.1/h" }, [], rules).webhookRule).toBe("loopback");
    expect(validateSubmission({ input: {}, webhook: "gopher://x" }, [], rules)).toEqual({
      errors: ["$.webhook: must be an http(s) URL"],
      webhookRule: "scheme",
    });
    expect(validateSubmission({ input: {}, webhook: "https://hooks.example.com/h" }, [], rules).value?.webhook).toBe("https://hooks.example.com/h");
  });
});

describe("validateSubmission: nulls and functions", () => {
  it("takes null optional members as absent, and refuses a null input", () => {
    const r = validateSubmission({ input: { a: 1 }, function: null, webhook: null, policy: { ttl: null, executionTimeout: null, lowPriority: null } }, ["a"]);
    expect(r).toEqual({ value: { input: { a: 1 } }, errors: [] });
    expect(validateSubmission({ input: { a: 1 }, policy: null }, []).errors).toEqual([]);
    expect(validateSubmission({ input: null }, []).errors).toEqual(["$.input: is required"]);
  });

  it("asks for a function by name when the endpoint serves several", () => {
    expect(validateSubmission({ input: {} }, ["embed", "rank"]).errors).toEqual([
      "$.function: is required: this endpoint serves several functions (embed, rank)",
    ]);
    expect(validateSubmission({ input: {} }, ["embed"]).errors).toEqual([]);
  });
});

describe("keyFromHeader", () => {
  it("takes `Bearer <key>` (any case) and the bare key; rejects the rest", () => {
    expect(keyFromHeader("Bearer abc")).toBe("abc");
    expect(keyFromHeader("bearer abc")).toBe("abc");
    expect(keyFromHeader("abc")).toBe("abc");
    expect(keyFromHeader(undefined)).toBeUndefined();
    expect(keyFromHeader("Bearer")).toBe("Bearer");
    expect(keyFromHeader("Basic a b")).toBeUndefined();
    expect(keyFromHeader("  ")).toBeUndefined();
  });
});

describe("splitChunk", () => {
  const limit = 4096;
  it("leaves small chunks whole and wraps bare values as {output}", () => {
    expect(splitChunk({ output: "a", metrics: { n: 1 } }, limit)).toEqual(['{"output":"a","metrics":{"n":1}}']);
    expect(splitChunk("a", limit)).toEqual(['{"output":"a"}']);
  });
  it("splits strings, arrays and an object's largest field so that every piece fits", () => {
    const text = "é".repeat(5000);
    const pieces = splitChunk({ output: text }, limit).map((p) => JSON.parse(p) as { output: string });
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.map((p) => p.output).join("")).toBe(text);
    const items = Array.from({ length: 2000 }, (_, i) => i);
    const arrays = splitChunk({ output: items }, limit).map((p) => JSON.parse(p) as { output: number[] });
    expect(arrays.flatMap((p) => p.output)).toEqual(items);
    const objects = splitChunk({ output: { text: ["x".repeat(3000), "y".repeat(3000)], tokens: 2 } }, limit).map(
      (p) => JSON.parse(p) as { output: { text: string[]; tokens?: number } },
    );
    expect(objects[0]!.output.tokens).toBe(2);
    expect(objects.flatMap((o) => o.output.text)).toEqual(["x".repeat(3000), "y".repeat(3000)]);
    for (const p of splitChunk({ output: text }, limit)) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(limit);
  });
});

describe("planDeploy", () => {
  const resource = { is_load_balanced: false, retries: 1 } as never;
  const input = { userId: "u", app: "a", env: "prod", resources: { one: resource, two: resource }, artifactPath: "/x", artifactHash: "h1" };
  it("gives stable ids, keeps unchanged revisions, replaces changed ones and removes dropped endpoints", () => {
    const first = planDeploy([], input, 1);
    expect(first.upsert.map((e) => e.id)).toEqual([endpointId("u", "a", "prod", "one"), endpointId("u", "a", "prod", "two")]);
    expect(first.upsert[0]!.id).toMatch(/^[a-z0-9]{16}$/);
    const same = planDeploy(first.upsert, input, 2);
    expect(same.changed).toEqual([]);
    expect(same.upsert[0]!.revision).toBe(first.upsert[0]!.revision);
    const next = planDeploy(first.upsert, { ...input, resources: { one: resource }, artifactHash: "h2" }, 3);
    expect(next.changed).toEqual([first.upsert[0]!.id]);
    expect(next.remove.map((e) => e.name)).toEqual(["two"]);
    expect(endpointId("v", "a", "prod", "one")).not.toBe(first.upsert[0]!.id);
  });
});
