// Per-file module summaries for static discovery: what a file imports, exports and declares at top level.
// Syntax only; src/build/discover.ts resolves what the names refer to.

import { ts, type TS } from "./typescript.js";
import { propertyKey, unwrapExpression } from "./discover-static.js";

export type ExportEntry = { kind: "local"; local: string } | { kind: "reexport"; spec: string; imported: string } | { kind: "expression"; expr: TS.Expression };

export interface ModuleInfo {
  file: string;
  source: TS.SourceFile;
  /** Local binding -> where it comes from; `imported` is a name, "default" or "*". */
  imports: Map<string, { spec: string; imported: string }>;
  exports: Map<string, ExportEntry>;
  starExports: string[];
  /** Local binding -> the names it is exported under (`export { a as b }`, `export default a`, `export const a`). */
  localExportNames: Map<string, string[]>;
  /** Top-level variable initializers (`const` only in `consts`, any kind in `vars`). */
  consts: Map<string, TS.Expression>;
  vars: Map<string, TS.VariableDeclaration>;
  functions: Map<string, TS.FunctionDeclaration>;
  classes: Map<string, TS.ClassDeclaration>;
}

export function hasModifier(node: TS.Node, kind: TS.SyntaxKind): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node)?.some((m) => m.kind === kind) ?? false);
}

export function scriptKind(file: string): TS.ScriptKind {
  if (file.endsWith(".tsx")) return ts.ScriptKind.TSX;
  if (file.endsWith(".jsx")) return ts.ScriptKind.JSX;
  if (/\.[mc]?js$/.test(file)) return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

/** Collect a file's imports, exports and top-level bindings (syntax only). */
export function summarize(file: string, source: TS.SourceFile): ModuleInfo {
  const info: ModuleInfo = {
    file,
    source,
    imports: new Map(),
    exports: new Map(),
    starExports: [],
    localExportNames: new Map(),
    consts: new Map(),
    vars: new Map(),
    functions: new Map(),
    classes: new Map(),
  };
  const exportLocal = (exported: string, local: string) => {
    info.exports.set(exported, { kind: "local", local });
    const names = info.localExportNames.get(local) ?? [];
    names.push(exported);
    info.localExportNames.set(local, names);
  };
  const requireSpec = (expr: TS.Expression | undefined): string | undefined => {
    if (!expr) return undefined;
    const call = unwrapExpression(expr);
    if (
      ts.isCallExpression(call) &&
      ts.isIdentifier(call.expression) &&
      call.expression.text === "require" &&
      call.arguments.length === 1 &&
      ts.isStringLiteral(call.arguments[0]!)
    ) {
      return (call.arguments[0] as TS.StringLiteral).text;
    }
    return undefined;
  };

  for (const statement of source.statements) {
    const exported = hasModifier(statement, ts.SyntaxKind.ExportKeyword);
    const isDefault = hasModifier(statement, ts.SyntaxKind.DefaultKeyword);
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (!clause || clause.isTypeOnly || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
      const spec = statement.moduleSpecifier.text;
      if (clause.name) info.imports.set(clause.name.text, { spec, imported: "default" });
      const bindings = clause.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) info.imports.set(bindings.name.text, { spec, imported: "*" });
      if (bindings && ts.isNamedImports(bindings)) {
        for (const element of bindings.elements) {
          if (element.isTypeOnly) continue;
          info.imports.set(element.name.text, { spec, imported: (element.propertyName ?? element.name).text });
        }
      }
    } else if (ts.isExportDeclaration(statement)) {
      if (statement.isTypeOnly) continue;
      const spec = statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier) ? statement.moduleSpecifier.text : undefined;
      const clause = statement.exportClause;
      if (spec !== undefined && !clause) info.starExports.push(spec);
      else if (spec !== undefined && clause && ts.isNamespaceExport(clause)) {
        info.exports.set(clause.name.text, { kind: "reexport", spec, imported: "*" });
      } else if (clause && ts.isNamedExports(clause)) {
        for (const element of clause.elements) {
          if (element.isTypeOnly) continue;
          const local = (element.propertyName ?? element.name).text;
          if (spec !== undefined) info.exports.set(element.name.text, { kind: "reexport", spec, imported: local });
          else exportLocal(element.name.text, local);
        }
      }
    } else if (ts.isExportAssignment(statement)) {
      const expr = unwrapExpression(statement.expression);
      if (ts.isIdentifier(expr)) exportLocal("default", expr.text);
      else info.exports.set("default", { kind: "expression", expr: statement.expression });
    } else if (ts.isVariableStatement(statement)) {
      const isConst = (statement.declarationList.flags & ts.NodeFlags.Const) !== 0;
      for (const declaration of statement.declarationList.declarations) {
        const spec = requireSpec(declaration.initializer);
        if (ts.isObjectBindingPattern(declaration.name) && spec !== undefined) {
          // const { Endpoint } = require("svc")
          for (const element of declaration.name.elements) {
            if (!ts.isIdentifier(element.name) || element.dotDotDotToken) continue;
            const imported = element.propertyName ? propertyKey(element.propertyName) : element.name.text;
            if (imported !== undefined) info.imports.set(element.name.text, { spec, imported });
          }
          continue;
        }
        if (!ts.isIdentifier(declaration.name)) continue;
        const name = declaration.name.text;
        if (spec !== undefined) {
          info.imports.set(name, { spec, imported: "*" });
          continue;
        }
        info.vars.set(name, declaration);
        if (isConst && declaration.initializer) info.consts.set(name, declaration.initializer);
        if (exported) exportLocal(name, name);
      }
    } else if (ts.isFunctionDeclaration(statement)) {
      if (statement.name) info.functions.set(statement.name.text, statement);
      if (exported && statement.name) exportLocal(isDefault ? "default" : statement.name.text, statement.name.text);
    } else if (ts.isClassDeclaration(statement)) {
      if (statement.name) info.classes.set(statement.name.text, statement);
      if (exported && statement.name) exportLocal(isDefault ? "default" : statement.name.text, statement.name.text);
    } else if (ts.isExpressionStatement(statement)) {
      // CommonJS: exports.x = ... / module.exports.x = ...
      const expr = statement.expression;
      if (ts.isBinaryExpression(expr) && expr.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
        const name = commonJsExportName(expr.left);
        if (name !== undefined) {
          const right = unwrapExpression(expr.right);
          if (ts.isIdentifier(right)) exportLocal(name, right.text);
          else info.exports.set(name, { kind: "expression", expr: expr.right });
        }
      }
    }
  }
  for (const names of info.localExportNames.values()) names.sort();
  return info;
}

export function commonJsExportName(left: TS.Expression): string | undefined {
  if (!ts.isPropertyAccessExpression(left) || !ts.isIdentifier(left.name)) return undefined;
  const target = left.expression;
  const isExports = ts.isIdentifier(target) && target.text === "exports";
  const isModuleExports =
    ts.isPropertyAccessExpression(target) && ts.isIdentifier(target.expression) && target.expression.text === "module" && target.name.text === "exports";
  return isExports || isModuleExports ? left.name.text : undefined;
}
