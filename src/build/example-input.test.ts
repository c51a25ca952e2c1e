import ts from "typescript";
import { describe, expect, it } from "vitest";
import { exampleInputOf } from "./example-input.js";

/** The example for the first function (or class method) in `code`. */
function example(code: string): unknown {
  const source = ts.createSourceFile("x.ts", code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  let fn: ts.SignatureDeclarationBase | undefined;
  const visit = (node: ts.Node) => {
    if (!fn && (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isMethodDeclaration(node))) fn = node;
    ts.forEachChild(node, visit);
  };
  visit(source);
  return exampleInputOf(fn, source);
}

describe("exampleInputOf", () => {
  it("builds an object from an inline object type: keywords, literals, arrays, optional members", () => {
    expect(
      example(`async function f(input: { url: string; factor?: number; sharp: boolean; mode: "fast" | "slow"; tags: string[]; size: [number, number] }) {}`),
    ).toEqual({
      url: "",
      factor: 0,
      sharp: false,
      mode: "fast",
      tags: [""],
      size: [0, 0],
    });
  });

  it("follows interfaces and type aliases of the same file, and stops at cycles", () => {
    const code = `
      interface Point { x: number; y: number }
      type Shape = { kind: "poly"; points: Array<Point>; meta?: Record<string, string>; next: Shape | null };
      export const f = (input: Shape) => input;`;
    expect(example(code)).toEqual({ kind: "poly", points: [{ x: 0, y: 0 }], meta: {}, next: null });
  });

  it("takes the first value of a union, merges intersections, and gives null for what the syntax does not tell", () => {
    expect(example(`function f(input: { a: undefined | string; b: null | number; c: { x: 1 } & { y: true }; d: Imported }) {}`)).toEqual({
      a: "",
      b: 0,
      c: { x: 1, y: true },
      d: null,
    });
  });

  it("gives nothing for a parameter without a type, or no parameter", () => {
    expect(example(`function f(input) {}`)).toBeUndefined();
    expect(example(`function f() {}`)).toBeUndefined();
  });

  it("reads a class method's parameter", () => {
    expect(example(`class C { async hello(input: { name: string; times?: number }) {} }`)).toEqual({ name: "", times: 0 });
  });
});
