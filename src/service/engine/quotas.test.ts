import { describe, expect, it } from "vitest";
import { DEFAULT_QUEUE_QUOTAS, exceededQuota, parseUserQuotas, quotaDetail, userQuota, type QueueQuotas } from "./quotas.js";

const quotas: QueueQuotas = { user: { jobs: 10, bytes: 1000 }, endpoint: { jobs: 4, bytes: 400 }, users: { big: { jobs: 100 } } };

describe("queue quotas", () => {
  it("admits a job that fits every quota, the last one that fits included", () => {
    expect(exceededQuota(quotas, { user: { jobs: 9, bytes: 900 }, endpoint: { jobs: 3, bytes: 300 } }, "u", 100)).toBeUndefined();
  });

  it("names the first quota a job would exceed: the user's jobs, then bytes, then the endpoint's", () => {
    expect(exceededQuota(quotas, { user: { jobs: 10, bytes: 0 }, endpoint: { jobs: 0, bytes: 0 } }, "u", 1)).toEqual({ limit: "user_jobs", quota: 10 });
    expect(exceededQuota(quotas, { user: { jobs: 0, bytes: 950 }, endpoint: { jobs: 0, bytes: 0 } }, "u", 51)).toEqual({ limit: "user_bytes", quota: 1000 });
    expect(exceededQuota(quotas, { user: { jobs: 4, bytes: 0 }, endpoint: { jobs: 4, bytes: 0 } }, "u", 1)).toEqual({ limit: "endpoint_jobs", quota: 4 });
    expect(exceededQuota(quotas, { user: { jobs: 0, bytes: 0 }, endpoint: { jobs: 0, bytes: 350 } }, "u", 51)).toEqual({ limit: "endpoint_bytes", quota: 400 });
  });

  it("applies only the endpoint's quota when the owner is not known", () => {
    expect(exceededQuota(quotas, { endpoint: { jobs: 3, bytes: 0 } }, undefined, 1)).toBeUndefined();
    expect(exceededQuota(quotas, { endpoint: { jobs: 4, bytes: 0 } }, undefined, 1)?.limit).toBe("endpoint_jobs");
  });

  it("gives a user the operator's override, the parts it leaves out from the service's", () => {
    expect(userQuota(quotas, "big")).toEqual({ jobs: 100, bytes: 1000 });
    expect(userQuota(quotas, "other")).toEqual(quotas.user);
    expect(exceededQuota(quotas, { user: { jobs: 50, bytes: 0 }, endpoint: { jobs: 0, bytes: 0 } }, "big", 1)).toBeUndefined();
  });

  it("keeps the defaults out of a normal user's way and per endpoint below per user", () => {
    expect(DEFAULT_QUEUE_QUOTAS.user).toEqual({ jobs: 20_000, bytes: 1024 ** 3 });
    expect(DEFAULT_QUEUE_QUOTAS.endpoint.jobs).toBeLessThan(DEFAULT_QUEUE_QUOTAS.user.jobs);
    expect(DEFAULT_QUEUE_QUOTAS.endpoint.bytes).toBeLessThan(DEFAULT_QUEUE_QUOTAS.user.bytes);
  });

  it("says which limit, its value and whose it is", () => {
    expect(quotaDetail("user_bytes", 1000, "ep1")).toMatch(/user_bytes \(at most 1000 bytes of queued input per user\)/);
    expect(quotaDetail("endpoint_jobs", 4, "ep1")).toMatch(/endpoint_jobs \(at most 4 queued jobs per endpoint \(ep1\)\)/);
  });

  it("parses per-user overrides and refuses anything else, naming it", () => {
    expect(parseUserQuotas("alice=jobs:50000/bytes:4294967296; bob=jobs:100")).toEqual({ alice: { jobs: 50_000, bytes: 4_294_967_296 }, bob: { jobs: 100 } });
    expect(parseUserQuotas("")).toEqual({});
    expect(() => parseUserQuotas("alice")).toThrow(/"alice" is not/);
    expect(() => parseUserQuotas("alice=jobs:0")).toThrow(/"jobs:0"/);
    expect(() => parseUserQuotas("alice=cpus:3")).toThrow(/"cpus:3"/);
  });
});
