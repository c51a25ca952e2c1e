import { describe, expect, it } from "vitest";
import { StopScanner } from "./stop.js";

describe("StopScanner", () => {
  it("cuts the text right before a stop string", () => {
    const scanner = new StopScanner(["END"]);
    expect(scanner.push("abc END def")).toEqual({ text: "abc ", stopped: true });
  });

  it("finds a stop string split across pieces, holding back its beginning meanwhile", () => {
    const scanner = new StopScanner(["\nQ:"]);
    expect(scanner.push("Answer.\n")).toEqual({ text: "Answer.", stopped: false });
    expect(scanner.push("Q")).toEqual({ text: "", stopped: false });
    expect(scanner.push(": next")).toEqual({ text: "", stopped: true });
  });

  it("releases held text that turned out not to be a stop string", () => {
    const scanner = new StopScanner(["STOP"]);
    expect(scanner.push("a ST")).toEqual({ text: "a ", stopped: false });
    expect(scanner.push("AR")).toEqual({ text: "STAR", stopped: false });
    expect(scanner.push(" S")).toEqual({ text: " ", stopped: false });
    expect(scanner.flush()).toBe("S");
  });

  it("stops at the earliest of several stop strings and ignores empty ones", () => {
    const scanner = new StopScanner(["", "world", "lo"]);
    expect(scanner.push("hello world")).toEqual({ text: "hel", stopped: true });
  });

  it("passes everything through without stop strings", () => {
    const scanner = new StopScanner([]);
    expect(scanner.push("anything")).toEqual({ text: "anything", stopped: false });
    expect(scanner.flush()).toBe("");
  });
});
