import { describe, expect, it } from "vitest";
import { workerHostPorts } from "./process-network.js";

describe("workerHostPorts", () => {
  it("reaches the job API's loopback port, and the operator's allowed ports", () => {
    expect(workerHostPorts({ apiUrl: "http://127.0.0.1:8080" })).toEqual([8080]);
    expect(workerHostPorts({ apiUrl: "http://localhost:8080" }, [4318, 9000])).toEqual([8080, 4318, 9000]);
  });

  it("adds the S3 API's port for a worker with a bucket key and the collector's where they are on this host, each once", () => {
    const bucket = { endpointUrl: "http://127.0.0.1:9100/s3/v1", accessKeyId: "k", secretAccessKey: "s" };
    expect(workerHostPorts({ apiUrl: "http://127.0.0.1:8080", bucket, traces: { tracesUrl: "http://127.0.0.1:4318/v1/traces" } }, [8080])).toEqual([
      8080, 9100, 4318,
    ]);
  });

  it("names no port for a service that is not on this host's loopback", () => {
    expect(workerHostPorts({ apiUrl: "https://svc.example.com", traces: { tracesUrl: "https://collector.example.com/v1/traces" } })).toEqual([]);
  });
});
