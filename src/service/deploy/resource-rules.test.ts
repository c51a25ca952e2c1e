import { describe, expect, it } from "vitest";
import type { ManifestResource } from "svc/internal";
import { scalerProblemsInResources } from "./resource-rules.js";

describe("scalerProblemsInResources", () => {
  const withScaler = (scaler: unknown) => ({ scaler }) as unknown as ManifestResource;
  it("refuses a policy the scaler cannot follow, naming the endpoint", () => {
    expect(scalerProblemsInResources({ b: withScaler({ type: "SOON", value: 4 }), a: withScaler({ type: "REQUEST_COUNT", value: 0 }) })).toEqual([
      'endpoint "a": "scaler.value" must be an integer from 1 to 3600 (QUEUE_DELAY: seconds a job waits; REQUEST_COUNT: jobs per worker)',
      'endpoint "b": "scaler.type" must be one of QUEUE_DELAY, REQUEST_COUNT',
    ]);
  });
  it("accepts either policy, and none (the default)", () => {
    expect(scalerProblemsInResources({ a: withScaler({ type: "QUEUE_DELAY", value: 4 }), b: withScaler(undefined), c: {} as ManifestResource })).toEqual([]);
  });
});
