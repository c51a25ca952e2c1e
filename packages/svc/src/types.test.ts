import { describe, expect, it } from "vitest";
import ts from "typescript";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../..", import.meta.url));

describe("SDK types", () => {
  it("infer inputs and outputs of endpoint functions, streams and class clients", () => {
    const file = `${root}fixtures/sdk-types/check.ts`;
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      types: ["node"],
      typeRoots: [`${root}node_modules/@types`],
      // "svc" resolves to this package's own source, as a user's project resolves the published types.
      baseUrl: root,
      paths: { svc: ["packages/svc/src/index.ts"] },
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      return `${d.file?.fileName.replace(root, "")}:${where ? where.line + 1 : "?"}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
    });
    expect(diagnostics).toEqual([]);
  }, 60_000);
});
