import { describe, expect, it } from "vitest";
import { tracesUrlOf } from "./index.js";

describe("tracesUrlOf", () => {
  it("is off unless an endpoint or SVC_TRACES=otlp says otherwise", () => {
    expect(tracesUrlOf({})).toBeUndefined();
    expect(tracesUrlOf({ traces: "otlp" })).toBe("http://localhost:4318/v1/traces");
  });

  it("appends /v1/traces to a base endpoint and takes a traces endpoint as it is", () => {
    expect(tracesUrlOf({ otlpEndpoint: "http://collector:4318/" })).toBe("http://collector:4318/v1/traces");
    expect(tracesUrlOf({ otlpEndpoint: "http://collector:4318", otlpTracesEndpoint: "http://other:9999/traces" })).toBe("http://other:9999/traces");
  });

  it("stays off with SVC_TRACES=off, whatever endpoint is set", () => {
    expect(tracesUrlOf({ traces: "off", otlpEndpoint: "http://collector:4318" })).toBeUndefined();
  });
});
