import { describe, expect, it } from "vitest";
import { interruptedDeployText, provisioningTarget } from "./deploy.js";

describe("Ctrl-C during svc deploy", () => {
  it("knows the release began from the provisioning line", () => {
    expect(provisioningTarget("Provisioning 3 endpoint(s) in my-app/prod")).toEqual({ app: "my-app", env: "prod" });
    expect(provisioningTarget("Uploading /tmp/a.tar.gz (10 bytes)")).toBeUndefined();
  });
  it("says the release goes on, with the commands to follow it and roll it back", () => {
    const text = interruptedDeployText("SIGINT", { app: "my-app", env: "prod" });
    expect(text).toContain("the release of my-app/prod goes on on the service");
    expect(text).toContain("svc env get --app my-app --env prod");
    expect(text).toContain("svc rollback --app my-app --env prod");
  });
  it("before the release, says nothing changed", () => {
    expect(interruptedDeployText("SIGINT", undefined)).toContain("before its release began; no endpoint changed");
  });
});
