import { describe, expect, it } from "vitest";
import { reservedEnvName, reservedEnvProblems } from "./env-policy.js";

describe("reservedEnvName", () => {
  it.each([
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_ANYTHING",
    "DYLD_INSERT_LIBRARIES",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYOPT",
    "BASH_ENV",
    "ENV",
    "JAVA_TOOL_OPTIONS",
    "GCONV_PATH",
    "OPENSSL_CONF",
    "node_options",
    "Ld_Preload",
  ])("refuses the loader variable %s", (name) => {
    expect(reservedEnvName(name)).toMatch(/^may not be set: it is a loader variable/);
  });

  it("refuses the worker protocol's SVC_ names", () => {
    expect(reservedEnvName("SVC_WORKER_TOKEN")).toMatch(/^may not be set: SVC_ variables belong to the worker protocol/);
  });

  it("lets an endpoint tune the runtime's stop grace and orphan wait, and nothing else of SVC_", () => {
    expect(reservedEnvName("SVC_STOP_GRACE_MS")).toBeUndefined();
    expect(reservedEnvName("SVC_ORPHAN_EXIT_MS")).toBeUndefined();
    expect(reservedEnvName("SVC_FULL_STACKS")).toBeUndefined();
    expect(reservedEnvName("SVC_ORPHAN_CHECK")).toMatch(/^may not be set/);
    expect(reservedEnvName("svc_stop_grace_ms")).toMatch(/^may not be set/);
  });

  it.each(["HF_TOKEN", "NODE_ENV", "NODE_EXTRA_CA_CERTS", "PYTHONUNBUFFERED", "PATH", "HOME", "OLD_PRELOAD", "ENVIRONMENT", "MY_LD_PRELOAD"])(
    "lets %s be set",
    (name) => {
      expect(reservedEnvName(name)).toBeUndefined();
    },
  );

  it("names each refused variable where it was given", () => {
    expect(reservedEnvProblems(["OK", "LD_PRELOAD", "SVC_X"], "$.env.")).toEqual([
      "$.env.LD_PRELOAD: may not be set: it is a loader variable, which makes a program load code other than the deployed build",
      "$.env.SVC_X: may not be set: SVC_ variables belong to the worker protocol and are set by the service",
    ]);
  });
});
