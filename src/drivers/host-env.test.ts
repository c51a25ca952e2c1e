import { describe, expect, it } from "vitest";
import { allowedHostEnv, envNameAllowed, envPatternProblem } from "./host-env.js";

describe("allowedHostEnv", () => {
  const service = {
    PATH: "/usr/bin",
    LANG: "C.UTF-8",
    LC_ALL: "C",
    TZ: "UTC",
    https_proxy: "http://proxy:3128",
    NO_PROXY: "localhost",
    SSL_CERT_FILE: "/etc/ssl/certs/ca.pem",
    AWS_SECRET_ACCESS_KEY: "operator-cloud-secret",
    DATABASE_URL: "postgres://svc:pw@db/svc",
    NODE_OPTIONS: "--max-old-space-size=8192",
    SVC_API_KEY: "admin",
    SVC_DATA_DIR: "/var/lib/svc",
    HOME: "/root",
  };

  it("passes locale, time zone, proxies and TLS roots, nothing else of the service's", () => {
    expect(allowedHostEnv(service)).toEqual({
      PATH: "/usr/bin",
      LANG: "C.UTF-8",
      LC_ALL: "C",
      TZ: "UTC",
      https_proxy: "http://proxy:3128",
      NO_PROXY: "localhost",
      SSL_CERT_FILE: "/etc/ssl/certs/ca.pem",
    });
  });

  it("takes the operator's extra names and prefixes, never svc's own settings", () => {
    const env = allowedHostEnv(service, ["DATABASE_URL", "AWS_*", "SVC_*", "SVC_API_KEY"]);
    expect(env.DATABASE_URL).toBe("postgres://svc:pw@db/svc");
    expect(env.AWS_SECRET_ACCESS_KEY).toBe("operator-cloud-secret");
    expect(env.SVC_API_KEY).toBeUndefined();
    expect(env.HOME).toBeUndefined();
    expect(envNameAllowed("SVC_DATA_DIR", ["*"])).toBe(false);
  });

  it("refuses entries that are not names, or that would pass everything", () => {
    expect(envPatternProblem("HF_TOKEN")).toBeUndefined();
    expect(envPatternProblem("HF_*")).toBeUndefined();
    expect(envPatternProblem("*")).toMatch(/whole environment/);
    expect(envPatternProblem("A=B")).toMatch(/not a variable name/);
    expect(envPatternProblem("SVC_X")).toMatch(/never passed/);
  });
});
