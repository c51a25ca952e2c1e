import { describe, expect, it } from "vitest";
import { chooseTarget, DEFAULT_API_URL, type NamedProfile } from "./target.js";

const prod: NamedProfile = { name: "prod", profile: { url: "https://svc.example/", apiKey: "k-prod", savedAt: 0 } };
const staging: NamedProfile = { name: "staging", profile: { url: "https://staging.example", apiKey: "k-staging", savedAt: 0 } };
const session = { url: "http://127.0.0.1:41000", apiKey: "k-dev", env: "dev" };

describe("which service a command talks to", () => {
  it("SVC_API_URL first, whatever else is there", () => {
    expect(chooseTarget({ apiUrl: "http://ci:8600/", apiKey: "k", named: staging, current: prod, session, env: "dev" })).toEqual({
      source: "environment",
      url: "http://ci:8600",
      apiKey: "k",
    });
  });

  it("then the profile named by --profile or SVC_PROFILE, even over a dev session", () => {
    expect(chooseTarget({ named: staging, current: prod, session, env: "dev" })).toMatchObject({ source: "profile", profile: "staging" });
  });

  it("a dev session for its own environment, over the current profile", () => {
    expect(chooseTarget({ current: prod, session, env: "dev" })).toEqual({ source: "dev-session", url: session.url, apiKey: "k-dev" });
  });

  it("the current profile over a dev session when no environment, or another one, is named", () => {
    expect(chooseTarget({ current: prod, session })).toEqual({ source: "profile", url: "https://svc.example", apiKey: "k-prod", profile: "prod" });
    expect(chooseTarget({ current: prod, session, env: "prod" })).toMatchObject({ source: "profile", profile: "prod" });
  });

  it("a dev session when nothing else is configured and no environment is named", () => {
    expect(chooseTarget({ session })).toMatchObject({ source: "dev-session" });
  });

  it("never a dev session for another environment: the local default, saying which session was passed over", () => {
    expect(chooseTarget({ session, env: "prod", apiKey: "k" })).toEqual({
      source: "default",
      url: DEFAULT_API_URL,
      apiKey: "k",
      passedOverSession: { url: session.url, env: "dev" },
    });
    expect(chooseTarget({})).toEqual({ source: "default", url: DEFAULT_API_URL, apiKey: undefined });
  });
});
