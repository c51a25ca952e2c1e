// Static discovery of endpoint definitions: parse the project's sources (never import or run them), find every
// `Endpoint(config)` and what it is applied to (functions, classes, HTTP routes), and validate the result.
//
// Two passes: per-file module summaries (imports, exports, top-level bindings), then a lazy, memoized
// evaluation of what each expression refers to ("the svc Endpoint function", "an Endpoint(...) object", ...)
// that follows imports and re-exports across files. Every violation is collected; one UserError lists them all.

import { readFile } from "node:fs/promises";
import path from "node:path";
import { ts, type TS } from "./typescript.js";
import { UserError } from "../errors.js";
import type { HttpMethod } from "svc/internal";
import { BUILTIN_IGNORES, findSourceFiles, SOURCE_PATTERN } from "./discover-files.js";
import { configSite, describeArg } from "./discover-config.js";
import { EndpointGrouping } from "./discover-endpoints.js";
import { exampleOf } from "./example-input.js";
import { commonJsExportName, hasModifier, scriptKind, summarize, type ModuleInfo } from "./discover-module.js";
import {
  compareMessages,
  locOf,
  problem,
  type DefInstance,
  type DiscoveredEndpoint,
  type DiscoverOptions,
  type DiscoveryResult,
  type Site,
} from "./discover-records.js";
import { propertyKey, unwrapExpression } from "./discover-static.js";

const ROUTE_METHODS = new Map<string, HttpMethod>([
  ["get", "GET"],
  ["post", "POST"],
  ["put", "PUT"],
  ["patch", "PATCH"],
  ["delete", "DELETE"],
]);

const SVC_MODULE = "\0svc";

/** What an expression refers to, as far as discovery cares (null: something else, or unknown). */
type Value =
  | { t: "endpointFn" }
  | { t: "svcNamespace" }
  | { t: "moduleNamespace"; file: string }
  | { t: "def"; def: DefInstance }
  | { t: "function"; name?: string; generator: boolean }
  | null;

// A file can only matter if it imports svc, re-exports everything from somewhere, or mentions a name another
// relevant file exports (imports and namespace accesses must spell the name). Others are never parsed.
const SVC_SPECIFIER = /["']svc["']/;
const STAR_EXPORT = /\bexport\s*\*/;
const DEFAULT_IMPORT = /\bimport\s+[A-Za-z_$][\w$]*\s*(,|from\b)|\brequire\s*\(/;

function namesPattern(names: Iterable<string>): RegExp | null {
  const escaped = [...names].filter((n) => n !== "default").map((n) => n.replace(/\$/g, "\\$"));
  return escaped.length === 0 ? null : new RegExp(`(?<![\\w$])(?:${escaped.join("|")})(?![\\w$])`);
}

class Analyzer {
  readonly problems: string[] = [];
  readonly warnings: string[] = [];
  private readonly modules = new Map<string, ModuleInfo>();
  private readonly bindingValues = new Map<string, Value>();
  private readonly exportValues = new Map<string, Value>();
  private readonly inProgress = new Set<string>();
  private readonly defs = new Map<TS.Node, DefInstance>();
  private readonly sites = new Map<string, Site>();
  private readonly fileSet: Set<string>;
  /** Files that passed the text pre-check: the only ones walked for Endpoint uses. */
  private selected: string[] = [];

  constructor(
    private readonly files: string[],
    private readonly texts: Map<string, string>,
  ) {
    this.fileSet = new Set(files);
  }

  /** Parse the files that can matter (see the pre-check above) and walk them. */
  run(): void {
    const selected = new Set<string>();
    const names = new Set<string>();
    for (;;) {
      const pattern = namesPattern(names);
      const wantsDefault = names.has("default");
      const added = this.files.filter((file) => {
        if (selected.has(file)) return false;
        const text = this.texts.get(file)!;
        return SVC_SPECIFIER.test(text) || STAR_EXPORT.test(text) || (pattern !== null && pattern.test(text)) || (wantsDefault && DEFAULT_IMPORT.test(text));
      });
      if (added.length === 0) break;
      for (const file of added) {
        selected.add(file);
        for (const name of this.module(file).exports.keys()) names.add(name);
      }
    }
    this.selected = [...selected].sort();
    for (const file of this.selected) this.walk(this.module(file));
  }

  private module(file: string): ModuleInfo {
    let info = this.modules.get(file);
    if (!info) {
      const source = ts.createSourceFile(file, this.texts.get(file)!, ts.ScriptTarget.Latest, true, scriptKind(file));
      info = summarize(file, source);
      this.modules.set(file, info);
    }
    return info;
  }

  // ---- module resolution -------------------------------------------------------------------------------

  private resolveSpecifier(from: string, spec: string): string | null {
    if (spec === "svc") return SVC_MODULE;
    if (!spec.startsWith("./") && !spec.startsWith("../") && spec !== "." && spec !== "..") return null;
    const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
    if (base.startsWith("../")) return null;
    const candidates = [base];
    const swaps: Record<string, string[]> = { ".js": [".ts", ".tsx"], ".jsx": [".tsx"], ".mjs": [".mts"], ".cjs": [".cts"] };
    const ext = path.posix.extname(base);
    for (const swapped of Object.hasOwn(swaps, ext) ? swaps[ext]! : []) candidates.push(base.slice(0, -ext.length) + swapped);
    const extensions = [".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"];
    for (const e of extensions) candidates.push(base + e);
    for (const e of extensions) candidates.push(`${base}/index${e}`);
    return candidates.find((c) => this.fileSet.has(c)) ?? null;
  }

  private resolveImport(from: ModuleInfo, spec: string, imported: string): Value {
    const target = this.resolveSpecifier(from.file, spec);
    if (target === SVC_MODULE) {
      if (imported === "Endpoint") return { t: "endpointFn" };
      return imported === "*" ? { t: "svcNamespace" } : null;
    }
    if (target === null) return null;
    return imported === "*" ? { t: "moduleNamespace", file: target } : this.resolveExport(target, imported);
  }

  private resolveExport(file: string, name: string): Value {
    const key = `${file}\0${name}`;
    if (this.exportValues.has(key)) return this.exportValues.get(key)!;
    if (this.inProgress.has(`export:${key}`)) return null;
    this.inProgress.add(`export:${key}`);
    const info = this.module(file);
    let value: Value = null;
    const entry = info.exports.get(name);
    if (entry?.kind === "local") value = this.bindingValue(info, entry.local);
    else if (entry?.kind === "reexport") value = this.resolveImport(info, entry.spec, entry.imported);
    else if (entry?.kind === "expression") value = this.evaluate(info, entry.expr);
    else if (name !== "default") {
      for (const spec of info.starExports) {
        value = this.resolveImport(info, spec, name);
        if (value) break;
      }
    }
    this.inProgress.delete(`export:${key}`);
    this.exportValues.set(key, value);
    return value;
  }

  // ---- what expressions refer to -----------------------------------------------------------------------

  private bindingValue(info: ModuleInfo, name: string): Value {
    const key = `${info.file}\0${name}`;
    if (this.bindingValues.has(key)) return this.bindingValues.get(key)!;
    if (this.inProgress.has(`binding:${key}`)) return null;
    this.inProgress.add(`binding:${key}`);
    let value: Value = null;
    const imported = info.imports.get(name);
    const fn = info.functions.get(name);
    const declaration = info.vars.get(name);
    if (imported) value = this.resolveImport(info, imported.spec, imported.imported);
    else if (fn) value = { t: "function", name: fn.name?.text, generator: fn.asteriskToken !== undefined };
    else if (declaration?.initializer) {
      value = this.evaluate(info, declaration.initializer);
      // `const work = async (x) => ...` gets its name from the binding at run time.
      if (value?.t === "function" && value.name === undefined) value = { ...value, name };
    }
    this.inProgress.delete(`binding:${key}`);
    this.bindingValues.set(key, value);
    return value;
  }

  private evaluate(info: ModuleInfo, node: TS.Expression): Value {
    const expr = unwrapExpression(node);
    if (ts.isIdentifier(expr)) return this.bindingValue(info, expr.text);
    if (ts.isPropertyAccessExpression(expr)) {
      const target = this.evaluate(info, expr.expression);
      if (target?.t === "svcNamespace") return expr.name.text === "Endpoint" ? { t: "endpointFn" } : null;
      if (target?.t === "moduleNamespace") return this.resolveExport(target.file, expr.name.text);
      return null;
    }
    if (ts.isCallExpression(expr)) {
      const callee = unwrapExpression(expr.expression);
      if (ts.isIdentifier(callee) && callee.text === "require" && expr.arguments.length === 1) {
        const arg = expr.arguments[0]!;
        if (ts.isStringLiteral(arg)) return this.resolveImport(info, arg.text, "*");
      }
      const calleeValue = this.evaluate(info, callee);
      if (calleeValue?.t === "endpointFn") return { t: "def", def: this.definition(info, expr) };
      // api.get(...).post(...) returns the same definition
      if (ts.isPropertyAccessExpression(callee) && ROUTE_METHODS.has(callee.name.text)) {
        const target = this.evaluate(info, callee.expression);
        if (target?.t === "def") return target;
      }
      return null;
    }
    if (ts.isFunctionExpression(expr)) {
      return { t: "function", name: expr.name?.text, generator: expr.asteriskToken !== undefined };
    }
    if (ts.isArrowFunction(expr)) return { t: "function", generator: false };
    return null;
  }

  // ---- Endpoint(...) calls and their configuration -----------------------------------------------------

  private definition(info: ModuleInfo, call: TS.CallExpression): DefInstance {
    const existing = this.defs.get(call);
    if (existing) return existing;
    const def: DefInstance = {
      module: info,
      node: call,
      loc: locOf(info, call),
      site: null,
      functions: [],
      routes: [],
      used: false,
    };
    this.defs.set(call, def);
    def.site = configSite(info, call, def.loc, this.sites, this.problems);
    def.site?.defs.push(def);
    return def;
  }

  // ---- uses: applications, class decorators, routes ----------------------------------------------------

  private walk(info: ModuleInfo): void {
    const visit = (node: TS.Node): void => {
      if (ts.isCallExpression(node)) this.onCall(info, node);
      if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) this.onClass(info, node);
      ts.forEachChild(node, visit);
    };
    visit(info.source);
  }

  private onCall(info: ModuleInfo, call: TS.CallExpression): void {
    const callee = unwrapExpression(call.expression);
    const calleeValue = this.evaluate(info, callee);
    if (calleeValue?.t === "endpointFn") {
      this.definition(info, call);
    } else if (calleeValue?.t === "def") {
      this.onApply(info, calleeValue.def, call);
    } else if (ts.isPropertyAccessExpression(callee) && ROUTE_METHODS.has(callee.name.text)) {
      const target = this.evaluate(info, callee.expression);
      if (target?.t === "def") this.onRoute(info, target.def, call, callee);
    }
  }

  /** The names a top-level value is exported under: `export const x = <node>`, `export default <node>`... */
  private exportNamesOf(info: ModuleInfo, node: TS.Node): { exportNames: string[]; localName?: string } {
    let current: TS.Node = node;
    while (
      ts.isParenthesizedExpression(current.parent) ||
      ts.isAsExpression(current.parent) ||
      ts.isSatisfiesExpression(current.parent) ||
      ts.isNonNullExpression(current.parent)
    ) {
      current = current.parent;
    }
    const parent = current.parent;
    if (ts.isExportAssignment(parent)) return { exportNames: ["default"] };
    if (
      ts.isVariableDeclaration(parent) &&
      parent.initializer === current &&
      ts.isIdentifier(parent.name) &&
      ts.isVariableStatement(parent.parent.parent) &&
      ts.isSourceFile(parent.parent.parent.parent)
    ) {
      const localName = parent.name.text;
      return { exportNames: this.preferred(info.localExportNames.get(localName) ?? [], localName), localName };
    }
    if (ts.isBinaryExpression(parent) && parent.right === current && ts.isExpressionStatement(parent.parent) && ts.isSourceFile(parent.parent.parent)) {
      const name = commonJsExportName(parent.left);
      if (name !== undefined) return { exportNames: [name] };
    }
    return { exportNames: [] };
  }

  private preferred(names: string[], own: string): string[] {
    return [...names].sort((a, b) => (a === own ? -1 : b === own ? 1 : a < b ? -1 : a > b ? 1 : 0));
  }

  private onApply(info: ModuleInfo, def: DefInstance, call: TS.CallExpression): void {
    def.used = true;
    const arg = call.arguments[0];
    if (!arg) return;
    const target = unwrapExpression(arg);
    const { exportNames, localName } = this.exportNamesOf(info, call);
    const exportName = exportNames[0];
    const cls = ts.isClassExpression(target) ? target : ts.isIdentifier(target) ? info.classes.get(target.text) : undefined;
    if (cls) {
      // `export const E = gpu(Embedder)`: the handler imports the decorated result, E.
      this.addClass(info, def, cls, exportName, arg);
      return;
    }
    let ownName: string | undefined;
    let generator = false;
    let knownFunction = false;
    if (ts.isFunctionExpression(target)) {
      ownName = target.name?.text;
      generator = target.asteriskToken !== undefined;
      knownFunction = true;
    } else if (ts.isArrowFunction(target)) {
      knownFunction = true;
    } else if (ts.isIdentifier(target)) {
      const value = this.bindingValue(info, target.text);
      ownName = value?.t === "function" ? (value.name ?? target.text) : target.text;
      generator = value?.t === "function" && value.generator;
      knownFunction = value?.t === "function";
    }
    const name = ownName ?? exportName ?? localName ?? "default";
    const loc = locOf(info, arg);
    const endpoint = def.site?.raw?.name;
    def.appliedAt ??= loc;
    def.functions.push({
      name,
      exportName: exportName ?? localName ?? name,
      module: info.file,
      kind: generator ? "generator" : "function",
      loc,
      anonymous: ownName === undefined,
      exported: exportName !== undefined,
      ...exampleOf(this.functionNode(info, target), info.source),
    });
    if (exportName === undefined && endpoint !== undefined) {
      this.problems.push(
        problem(
          loc,
          `endpoint function "${name}" (endpoint "${endpoint}") is not exported; the generated handler must import it`,
          `export it, e.g. \`export const ${localName ?? name} = ...\` at the top level of the module`,
        ),
      );
    }
    if (!knownFunction && !ts.isIdentifier(target) && endpoint !== undefined) {
      // e.g. gpu(wrap(fn)): the build cannot see a function here.
      this.problems.push(
        problem(
          loc,
          `endpoint "${endpoint}" is applied to ${describeArg(arg, info.source)}, which is not a function the build can see`,
          "apply it directly to a function expression, an arrow function or the name of a function",
        ),
      );
    }
  }

  /** The function an endpoint is applied to, when this file declares it (for its parameter's type). */
  private functionNode(info: ModuleInfo, target: TS.Expression): TS.SignatureDeclarationBase | undefined {
    if (ts.isFunctionExpression(target) || ts.isArrowFunction(target)) return target;
    if (!ts.isIdentifier(target)) return undefined;
    const declared = info.functions.get(target.text);
    if (declared) return declared;
    const init = info.consts.get(target.text);
    const value = init ? unwrapExpression(init) : undefined;
    return value && (ts.isFunctionExpression(value) || ts.isArrowFunction(value)) ? value : undefined;
  }

  private onClass(info: ModuleInfo, cls: TS.ClassDeclaration | TS.ClassExpression): void {
    const decorators = ts.canHaveDecorators(cls) ? (ts.getDecorators(cls) ?? []) : [];
    for (const decorator of decorators) {
      const value = this.evaluate(info, decorator.expression);
      if (value?.t !== "def") continue;
      const className = cls.name?.text;
      let exportNames: string[];
      if (hasModifier(cls, ts.SyntaxKind.ExportKeyword)) {
        exportNames = [hasModifier(cls, ts.SyntaxKind.DefaultKeyword) ? "default" : (className ?? "default")];
      } else if (ts.isClassDeclaration(cls) && className) {
        exportNames = this.preferred(info.localExportNames.get(className) ?? [], className);
      } else {
        exportNames = this.exportNamesOf(info, cls).exportNames;
      }
      this.addClass(info, value.def, cls, exportNames[0]);
    }
  }

  /** A class endpoint: `@def class X`, `def(X)` or `def(class {...})`; its public methods are the functions. */
  private addClass(
    info: ModuleInfo,
    def: DefInstance,
    cls: TS.ClassDeclaration | TS.ClassExpression,
    exportName: string | undefined,
    appliedAt?: TS.Node,
  ): void {
    def.used = true;
    const label = cls.name?.text ?? exportName ?? "default";
    const classLoc = locOf(info, appliedAt ?? cls.name ?? cls);
    const endpoint = def.site?.raw?.name;
    def.appliedAt ??= classLoc;
    if (exportName === undefined && endpoint !== undefined) {
      this.problems.push(
        problem(
          classLoc,
          `endpoint class "${label}" (endpoint "${endpoint}") is not exported; the generated handler must import it`,
          `export it: \`export class ${label} {...}\` or \`export { ${label} }\``,
        ),
      );
    }
    let methods = 0;
    for (const member of cls.members) {
      if (!ts.isMethodDeclaration(member) || member.body === undefined) continue;
      if (ts.isPrivateIdentifier(member.name)) continue;
      if (
        hasModifier(member, ts.SyntaxKind.StaticKeyword) ||
        hasModifier(member, ts.SyntaxKind.PrivateKeyword) ||
        hasModifier(member, ts.SyntaxKind.ProtectedKeyword)
      ) {
        continue;
      }
      const methodName = propertyKey(member.name);
      if (methodName === undefined || methodName.startsWith("_") || methodName === "constructor") continue;
      methods++;
      def.functions.push({
        name: methodName,
        exportName: exportName ?? label,
        module: info.file,
        kind: member.asteriskToken ? "generator-method" : "method",
        className: label,
        loc: locOf(info, member.name),
        anonymous: false,
        exported: exportName !== undefined,
        ...exampleOf(member, info.source),
      });
    }
    if (methods === 0 && endpoint !== undefined) {
      this.problems.push(
        problem(
          classLoc,
          `endpoint class "${label}" (endpoint "${endpoint}") has no public methods to serve`,
          "add a public method, e.g. `async run(input) {...}` (methods that are static, private, protected, accessors or start with _ are not served)",
        ),
      );
    }
  }

  private onRoute(info: ModuleInfo, def: DefInstance, call: TS.CallExpression, callee: TS.PropertyAccessExpression): void {
    def.used = true;
    const method = ROUTE_METHODS.get(callee.name.text)!;
    const loc = locOf(info, callee.name);
    const pathArg = call.arguments[0] ? unwrapExpression(call.arguments[0]) : undefined;
    if (!pathArg || !(ts.isStringLiteral(pathArg) || ts.isNoSubstitutionTemplateLiteral(pathArg))) {
      this.problems.push(
        problem(
          loc,
          `the path of route .${callee.name.text}(...) must be a string literal, but it is ${pathArg ? describeArg(pathArg, info.source) : "missing"}`,
          `write the path literally, e.g. .${callee.name.text}("/items/:id", handler)`,
        ),
      );
      return;
    }
    const handler = call.arguments[1] ? unwrapExpression(call.arguments[1]) : undefined;
    if (!handler) {
      this.problems.push(
        problem(
          loc,
          `route ${method} ${pathArg.text} has no handler`,
          `pass a handler: .${callee.name.text}("${pathArg.text}", async (body) => ({ ok: true }))`,
        ),
      );
      return;
    }
    let handlerName: string | undefined;
    if (ts.isFunctionExpression(handler)) handlerName = handler.name?.text;
    else if (ts.isIdentifier(handler)) handlerName = handler.text;
    def.routes.push({ method, path: pathArg.text, handlerName, loc });
  }
  // ---- grouping and validation (discover-endpoints.ts) ---------------------------------------------------

  endpoints(): DiscoveredEndpoint[] {
    return new EndpointGrouping(this.problems, this.warnings, (def) => this.exportOfDefinition(def)).endpoints(this.sites.values(), this.defs.values());
  }

  /** Where a definition object is exported: its own module first, then any module re-exporting it. */
  private exportOfDefinition(def: DefInstance): { module: string; exportName: string } | undefined {
    const files = [def.module.file, ...this.selected.filter((f) => f !== def.module.file)];
    for (const file of files) {
      const names = [...this.module(file).exports.keys()].sort();
      for (const exportName of names) {
        const value = this.resolveExport(file, exportName);
        if (value?.t === "def" && value.def === def) return { module: file, exportName };
      }
    }
    return undefined;
  }
}

/**
 * Find every endpoint definition under `root` without running any user code.
 * Throws UserError listing every problem found (each "file:line: what. Fix: how").
 */
export async function discover(root: string, options: DiscoverOptions = {}): Promise<DiscoveryResult> {
  const absoluteRoot = path.resolve(root);
  const extraIgnores = options.ignore ?? [];
  const files = await findSourceFiles(absoluteRoot, extraIgnores);
  const texts = new Map<string, string>();
  await Promise.all(
    files.map(async (file) => {
      texts.set(file, await readFile(path.join(absoluteRoot, file), "utf8"));
    }),
  );
  const analyzer = new Analyzer(files, texts);
  analyzer.run();
  const endpoints = analyzer.endpoints();
  const problems = [...new Set(analyzer.problems)].sort(compareMessages);
  if (problems.length > 0) {
    throw new UserError(`Found ${problems.length} problem${problems.length === 1 ? "" : "s"} in endpoint definitions`, {
      problems,
      hint: "Fix each problem at the file:line shown; docs/endpoint-definitions.md lists the supported forms and rules.",
    });
  }
  if (endpoints.length === 0) {
    const ignores = [...BUILTIN_IGNORES, ".gitignore rules", ...extraIgnores].join(", ");
    throw new UserError(
      `No endpoint functions found in ${absoluteRoot}: scanned ${files.length} file${files.length === 1 ? "" : "s"} matching ${SOURCE_PATTERN} (ignored: ${ignores})`,
      {
        hint:
          "Two common causes: (1) decorator syntax: Endpoint({...}) returns a decorator, so apply it with a second call, " +
          'e.g. `export const fn = Endpoint({ name: "my-endpoint" })(async function fn(input) {...})`, and import Endpoint ' +
          'from "svc"; (2) ignore patterns: .gitignore or the built-in ignores (node_modules, dist, build, test folders, ' +
          "*.test.*, *.spec.*) may exclude the files that define your endpoints.",
      },
    );
  }
  return { root: absoluteRoot, files, endpoints, warnings: [...new Set(analyzer.warnings)].sort(compareMessages) };
}
