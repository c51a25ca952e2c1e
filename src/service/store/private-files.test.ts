import { describe, expect, it } from "vitest";
import { tightened } from "./private-files.js";

describe("tightened", () => {
  it("keeps the owner's permissions and drops the group's, others' and set-id bits", () => {
    expect(tightened(0o40755)).toBe(0o700);
    expect(tightened(0o100644)).toBe(0o600);
    expect(tightened(0o100600)).toBe(0o600);
    expect(tightened(0o102775)).toBe(0o700);
    expect(tightened(0o100444)).toBe(0o400);
  });
});
