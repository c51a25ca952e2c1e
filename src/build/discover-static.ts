// Static evaluation of endpoint configuration: only values the build can know without running user code
// (literals, arrays/objects of them, and same-file constants holding such values).

import { ts, type TS } from "./typescript.js";

export type StaticValue = string | number | boolean | null | undefined | StaticValue[] | { [key: string]: StaticValue };

export interface StaticIssue {
  node: TS.Node;
  /** Dotted path of the offending property, e.g. "env.TOKEN" ("" for the whole config). */
  keyPath: string;
  found: string;
}

/** Strip wrappers that do not change the value: parentheses, `as const`, `satisfies`, `!`, `<T>x`. */
export function unwrapExpression(node: TS.Expression): TS.Expression {
  let current = node;
  for (;;) {
    if (
      ts.isParenthesizedExpression(current) ||
      ts.isAsExpression(current) ||
      ts.isSatisfiesExpression(current) ||
      ts.isNonNullExpression(current) ||
      ts.isTypeAssertionExpression(current)
    ) {
      current = current.expression;
    } else {
      return current;
    }
  }
}

/** Describe an expression briefly for error messages ("a function call", "process.env.X"...). */
export function describeExpression(node: TS.Expression, source: TS.SourceFile): string {
  const text = node.getText(source).replace(/\s+/g, " ");
  const short = text.length > 40 ? `${text.slice(0, 37)}...` : text;
  if (ts.isCallExpression(node) || ts.isNewExpression(node)) return `a call (${short})`;
  if (ts.isIdentifier(node)) return `"${short}", which is not a constant with a literal value in this file`;
  if (ts.isTemplateExpression(node)) return `a template literal with substitutions (${short})`;
  return `"${short}"`;
}

export class StaticEvaluator {
  private readonly evaluating = new Set<string>();

  /** `lookupConst(name)` returns the initializer of a top-level `const name = ...` of the same file. */
  constructor(
    private readonly source: TS.SourceFile,
    private readonly lookupConst: (name: string) => TS.Expression | undefined,
  ) {}

  evaluate(node: TS.Expression, keyPath: string, issues: StaticIssue[]): StaticValue {
    const expr = unwrapExpression(node);
    if (ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) return expr.text;
    if (ts.isNumericLiteral(expr)) return Number(expr.text);
    if (expr.kind === ts.SyntaxKind.TrueKeyword) return true;
    if (expr.kind === ts.SyntaxKind.FalseKeyword) return false;
    if (expr.kind === ts.SyntaxKind.NullKeyword) return null;
    if (
      ts.isPrefixUnaryExpression(expr) &&
      (expr.operator === ts.SyntaxKind.MinusToken || expr.operator === ts.SyntaxKind.PlusToken) &&
      ts.isNumericLiteral(unwrapExpression(expr.operand))
    ) {
      const value = Number((unwrapExpression(expr.operand) as TS.NumericLiteral).text);
      return expr.operator === ts.SyntaxKind.MinusToken ? -value : value;
    }
    if (ts.isIdentifier(expr)) {
      if (expr.text === "undefined") return undefined;
      const init = this.lookupConst(expr.text);
      if (init && !this.evaluating.has(expr.text)) {
        this.evaluating.add(expr.text);
        try {
          return this.evaluate(init, keyPath, issues);
        } finally {
          this.evaluating.delete(expr.text);
        }
      }
      issues.push({ node: expr, keyPath, found: describeExpression(expr, this.source) });
      return undefined;
    }
    if (ts.isArrayLiteralExpression(expr)) {
      const items: StaticValue[] = [];
      expr.elements.forEach((element, index) => {
        if (ts.isSpreadElement(element)) {
          issues.push({ node: element, keyPath: `${keyPath}[${index}]`, found: `a spread (${element.getText(this.source)})` });
        } else {
          items.push(this.evaluate(element, `${keyPath}[${index}]`, issues));
        }
      });
      return items;
    }
    if (ts.isObjectLiteralExpression(expr)) {
      const result: { [key: string]: StaticValue } = {};
      for (const property of expr.properties) {
        const key = property.name ? propertyKey(property.name) : undefined;
        const childPath = key === undefined ? keyPath : keyPath ? `${keyPath}.${key}` : key;
        if (ts.isSpreadAssignment(property)) {
          issues.push({ node: property, keyPath, found: `a spread (${property.getText(this.source)})` });
        } else if (key === undefined) {
          issues.push({ node: property, keyPath: childPath, found: "a computed property name" });
        } else if (ts.isPropertyAssignment(property)) {
          result[key] = this.evaluate(property.initializer, childPath, issues);
        } else if (ts.isShorthandPropertyAssignment(property)) {
          result[key] = this.evaluate(property.name, childPath, issues);
        } else {
          issues.push({ node: property, keyPath: childPath, found: "a method or accessor" });
        }
      }
      return result;
    }
    issues.push({ node: expr, keyPath, found: describeExpression(expr, this.source) });
    return undefined;
  }
}

/** The static text of a property name, or undefined for computed names. */
export function propertyKey(name: TS.PropertyName): string | undefined {
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name) || ts.isPrivateIdentifier(name)) {
    return name.text;
  }
  if (ts.isNoSubstitutionTemplateLiteral(name)) return name.text;
  if (ts.isComputedPropertyName(name)) {
    const inner = unwrapExpression(name.expression);
    if (ts.isStringLiteral(inner) || ts.isNoSubstitutionTemplateLiteral(inner)) return inner.text;
  }
  return undefined;
}
