// An example input for an endpoint function, derived from the TypeScript type of its first parameter, read from
// the syntax alone (like the rest of discovery: no type checker, nothing run). The console's "Try it" starts
// from it. Types declared in the same file (interfaces, type aliases) are followed; anything the syntax does not
// tell (an imported type, a generic) becomes null, and a parameter without a type gives no example at all.

import { ts, type TS } from "./typescript.js";

const MAX_DEPTH = 8;

/** Top-level interfaces and type aliases of a file, by name. */
function typeScope(source: TS.SourceFile): Map<string, TS.InterfaceDeclaration | TS.TypeAliasDeclaration> {
  const scope = new Map<string, TS.InterfaceDeclaration | TS.TypeAliasDeclaration>();
  for (const statement of source.statements) {
    if ((ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement)) && !scope.has(statement.name.text)) {
      scope.set(statement.name.text, statement);
    }
  }
  return scope;
}

function memberName(name: TS.PropertyName): string | undefined {
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return undefined;
}

const ABSENT = Symbol("absent");
type Example = unknown | typeof ABSENT;

class Examples {
  private readonly scope: Map<string, TS.InterfaceDeclaration | TS.TypeAliasDeclaration>;
  private readonly following = new Set<string>();

  constructor(source: TS.SourceFile) {
    this.scope = typeScope(source);
  }

  members(members: TS.NodeArray<TS.TypeElement>, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const member of members) {
      if (!ts.isPropertySignature(member) || !member.type) continue;
      const name = memberName(member.name);
      if (name === undefined) continue;
      const value = this.of(member.type, depth + 1);
      if (value !== ABSENT) out[name] = value;
    }
    return out;
  }

  of(node: TS.TypeNode, depth: number): Example {
    if (depth > MAX_DEPTH) return null;
    switch (node.kind) {
      case ts.SyntaxKind.StringKeyword:
        return "";
      case ts.SyntaxKind.NumberKeyword:
      case ts.SyntaxKind.BigIntKeyword:
        return 0;
      case ts.SyntaxKind.BooleanKeyword:
        return false;
      case ts.SyntaxKind.NullKeyword:
        return null;
      case ts.SyntaxKind.UndefinedKeyword:
      case ts.SyntaxKind.VoidKeyword:
      case ts.SyntaxKind.NeverKeyword:
        return ABSENT;
      case ts.SyntaxKind.AnyKeyword:
      case ts.SyntaxKind.UnknownKeyword:
      case ts.SyntaxKind.ObjectKeyword:
        return {};
    }
    if (ts.isLiteralTypeNode(node)) {
      const literal = node.literal;
      if (ts.isStringLiteral(literal) || ts.isNoSubstitutionTemplateLiteral(literal)) return literal.text;
      if (ts.isNumericLiteral(literal)) return Number(literal.text);
      if (literal.kind === ts.SyntaxKind.TrueKeyword) return true;
      if (literal.kind === ts.SyntaxKind.FalseKeyword) return false;
      if (literal.kind === ts.SyntaxKind.NullKeyword) return null;
      if (ts.isPrefixUnaryExpression(literal) && ts.isNumericLiteral(literal.operand)) return -Number(literal.operand.text);
      return null;
    }
    if (ts.isParenthesizedTypeNode(node) || ts.isTypeOperatorNode(node)) return this.of(node.type, depth);
    if (ts.isArrayTypeNode(node)) return this.list(node.elementType, depth);
    if (ts.isTupleTypeNode(node)) {
      return node.elements.map((e) => this.of(ts.isNamedTupleMember(e) ? e.type : e, depth + 1)).filter((v) => v !== ABSENT);
    }
    if (ts.isUnionTypeNode(node)) {
      // The first member that is a value: `string | undefined` is a string, `null | T` a T.
      const values = node.types.map((t) => this.of(t, depth)).filter((v) => v !== ABSENT);
      return values.find((v) => v !== null) ?? (values.length > 0 ? null : ABSENT);
    }
    if (ts.isIntersectionTypeNode(node)) {
      const parts = node.types.map((t) => this.of(t, depth));
      const objects = parts.filter((p): p is Record<string, unknown> => typeof p === "object" && p !== null && !Array.isArray(p));
      return objects.length > 0 ? Object.assign({}, ...objects) : (parts[0] ?? null);
    }
    if (ts.isTypeLiteralNode(node)) return this.members(node.members, depth);
    if (ts.isTypeReferenceNode(node)) return this.reference(node, depth);
    return null;
  }

  private list(element: TS.TypeNode | undefined, depth: number): unknown[] {
    if (!element) return [];
    const value = this.of(element, depth + 1);
    return value === ABSENT ? [] : [value];
  }

  private reference(node: TS.TypeReferenceNode, depth: number): Example {
    const name = ts.isIdentifier(node.typeName) ? node.typeName.text : undefined;
    const args = node.typeArguments ?? ts.factory.createNodeArray<TS.TypeNode>();
    switch (name) {
      case "Array":
      case "ReadonlyArray":
        return this.list(args[0], depth);
      case "Promise":
      case "Readonly":
      case "Partial":
      case "Required":
      case "NonNullable":
        return args[0] ? this.of(args[0], depth) : null;
      case "Record":
      case "Map":
        return {};
      case "Date":
        return "1970-01-01T00:00:00.000Z";
    }
    const declaration = name === undefined ? undefined : this.scope.get(name);
    if (!declaration || this.following.has(name!)) return null;
    this.following.add(name!);
    try {
      if (ts.isTypeAliasDeclaration(declaration)) return this.of(declaration.type, depth + 1);
      return this.members(declaration.members, depth);
    } finally {
      this.following.delete(name!);
    }
  }
}

/**
 * The example input for a function or method: built from its first parameter's type annotation. `undefined`
 * when the parameter has no type (or there is none). Pure.
 */
export function exampleInputOf(fn: TS.SignatureDeclarationBase | undefined, source: TS.SourceFile): unknown {
  const type = fn?.parameters[0]?.type;
  if (!type) return undefined;
  const value = new Examples(source).of(type, 0);
  return value === ABSENT ? undefined : value;
}

/** `{ exampleInput }` when there is one, else nothing: for spreading into a record. Pure. */
export function exampleOf(fn: TS.SignatureDeclarationBase | undefined, source: TS.SourceFile): { exampleInput?: unknown } {
  const exampleInput = exampleInputOf(fn, source);
  return exampleInput === undefined ? {} : { exampleInput };
}
