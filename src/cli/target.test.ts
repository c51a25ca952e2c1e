import { describe, expect, it } from "vitest";
import { keyForShell } from "./target.js";

describe("the key a printed command carries", () => {
  it("is $SVC_API_KEY only when the shell has exactly that key exported", () => {
    expect(keyForShell({ key: "k1", exported: "k1", invokedAs: "/usr/bin/svc", cwd: "/p" })).toBe("$SVC_API_KEY");
    expect(keyForShell({ key: "k1", exported: "other", invokedAs: "/home/u/bin/svc", cwd: "/p", profileFlag: "prod" })).toBe(
      "$(svc --profile prod whoami --key)",
    );
  });
  it("names svc as it is reached: npx for the project's own svc-cli, plain for a global install", () => {
    expect(keyForShell({ key: "k1", exported: undefined, invokedAs: "/home/u/app/node_modules/svc-cli/bin/svc.js", cwd: "/home/u/app/src" })).toBe(
      "$(npx svc whoami --key)",
    );
    expect(keyForShell({ key: "k1", exported: undefined, invokedAs: "/usr/lib/node_modules/svc-cli/bin/svc.js", cwd: "/home/u/app" })).toBe(
      "$(svc whoami --key)",
    );
  });
});
