import { describe, expect, it } from "vitest";
import { UsageError } from "../errors.js";
import { curlFor } from "./access.js";
import { describeRemoval } from "./index.js";
import { chooseEnvironment, unknownEnvironment } from "./names.js";

describe("chooseEnvironment", () => {
  it("the flag wins; else the only environment; else production", () => {
    expect(chooseEnvironment("staging", ["a", "b"], "shop")).toBe("staging");
    expect(chooseEnvironment(undefined, ["qa"], "shop")).toBe("qa");
    expect(chooseEnvironment(undefined, [], "shop")).toBe("production");
  });

  it("several environments and no flag: a usage error listing them", () => {
    expect(() => chooseEnvironment(undefined, ["prod", "staging"], "shop")).toThrow(UsageError);
    expect(() => chooseEnvironment(undefined, ["prod", "staging"], "shop")).toThrow('App "shop" has 2 environments (prod, staging); say which one with --env');
  });
});

describe("curlFor", () => {
  it("queue endpoints: runsync with the bearer header", () => {
    expect(curlFor({ url: "http://h/v2/abc", type: "queue", routes: [] })).toBe(
      `curl -s -X POST http://h/v2/abc/runsync -H "Authorization: Bearer $SVC_API_KEY" -H "Content-Type: application/json" -d '{"input":{}}'`,
    );
  });
  it("load-balanced endpoints: their first route", () => {
    expect(curlFor({ url: "http://h/v2/abc", type: "lb", routes: ["GET /status", "POST /process"] })).toBe(
      `curl -s -X GET http://h/v2/abc/status -H "Authorization: Bearer $SVC_API_KEY"`,
    );
  });
});

it("describeRemoval names every endpoint", () => {
  expect(
    describeRemoval(
      {
        remove: [
          { name: "a", id: "1" },
          { name: "b", id: "2" },
        ],
      },
      "shop",
      "prod",
    ),
  ).toBe('removes 2 endpoint(s) from app "shop", environment "prod": a, b');
});

describe("unknownEnvironment", () => {
  it("lists the environments the app has", () => {
    const err = unknownEnvironment("my-app", "prd", ["prod", "staging"]);
    expect(err.message).toBe('No environment "prd" in my-app (it has: prod, staging)');
    expect(err.hint).toContain("--env");
    expect(unknownEnvironment("my-app", "prd", []).message).toBe('No environment "prd" in my-app (it has: none)');
  });
});
