import { describe, expect, it } from "vitest";
import { kindsFromFlags } from "./images.js";

describe("svc images build: which images", () => {
  it("builds both worker images by default, the server image only when asked", () => {
    expect(kindsFromFlags({})).toEqual(["cpu", "gpu"]);
    expect(kindsFromFlags({ server: true })).toEqual(["server"]);
    expect(kindsFromFlags({ cpu: true, server: true })).toEqual(["cpu", "server"]);
    expect(kindsFromFlags({ all: true, server: true })).toEqual(["cpu", "gpu", "server"]);
    expect(kindsFromFlags({ gpu: true })).toEqual(["gpu"]);
  });
});
