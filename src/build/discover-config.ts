// The configuration of an Endpoint(...) call: it must be statically known (an object literal, or a const of the
// same file holding one) and valid (configProblems); each such object is one configuration site, however many
// Endpoint calls share it. Apart from the analyzer (discover.ts), which finds the calls and what they refer to.

import { ts, type TS } from "./typescript.js";
import type { SourceLocation } from "../errors.js";
import { configProblems, type EndpointConfig } from "svc/internal";
import type { ModuleInfo } from "./discover-module.js";
import { locOf, problem, type Site } from "./discover-records.js";
import { propertyKey, StaticEvaluator, unwrapExpression, type StaticIssue } from "./discover-static.js";

/**
 * The configuration site of `call` (memoized in `sites` by its object), or null when its configuration is not
 * statically known; every problem found goes to `problems`.
 */
export function configSite(info: ModuleInfo, call: TS.CallExpression, callLoc: SourceLocation, sites: Map<string, Site>, problems: string[]): Site | null {
  const arg = call.arguments[0];
  const fixStatic = 'pass an object literal, e.g. Endpoint({ name: "my-endpoint", gpu: "ANY" }), or a const declared in this file';
  if (!arg) {
    problems.push(problem(callLoc, "Endpoint() is called without a configuration", fixStatic));
    return null;
  }
  const inner = unwrapExpression(arg);
  let key: string;
  let loc: SourceLocation;
  let objectNode: TS.Expression;
  const constInit = ts.isIdentifier(inner) ? info.consts.get(inner.text) : undefined;
  if (ts.isObjectLiteralExpression(inner)) {
    key = `${info.file}@${call.getStart(info.source)}`;
    loc = callLoc;
    objectNode = inner;
  } else if (constInit && ts.isObjectLiteralExpression(unwrapExpression(constInit))) {
    // Several Endpoint(config) calls sharing one const are one configuration site.
    key = `${info.file}#${(inner as TS.Identifier).text}`;
    loc = locOf(info, info.vars.get((inner as TS.Identifier).text)!);
    objectNode = constInit;
  } else {
    problems.push(
      problem(
        locOf(info, arg),
        `the configuration passed to Endpoint(...) must be statically known, but it is ${describeArg(arg, info.source, ", which is not a const with an object literal in this file")}`,
        fixStatic,
      ),
    );
    return null;
  }
  const cached = sites.get(key);
  if (cached) return cached;

  const issues: StaticIssue[] = [];
  const evaluator = new StaticEvaluator(info.source, (name) => info.consts.get(name));
  const raw = evaluator.evaluate(objectNode, "", issues);
  for (const issue of issues) {
    const what = issue.keyPath ? `configuration value "${issue.keyPath}"` : "endpoint configuration";
    problems.push(
      problem(
        locOf(info, issue.node),
        `the ${what} must be statically known (a literal or a const of this file), but it is ${issue.found}`,
        "write the value as a literal (or a const with a literal value in this file); read dynamic values at run time inside the function",
      ),
    );
  }
  let valid = issues.length === 0;
  if (valid) {
    for (const message of configProblems(raw)) {
      valid = false;
      problems.push(
        problem(configKeyLoc(info, unwrapExpression(objectNode), message) ?? loc, `invalid endpoint configuration: ${message}`, configFix(message)),
      );
    }
  }
  const site: Site = { key, loc, raw: valid ? (raw as unknown as EndpointConfig) : undefined, valid, defs: [] };
  sites.set(key, site);
  return site;
}

/** The line of the property a configProblems() message is about (its first quoted word). */
function configKeyLoc(info: ModuleInfo, object: TS.Expression, message: string): SourceLocation | undefined {
  const key = /"([^"]+)"/.exec(message)?.[1]?.split(".")[0];
  if (!key || !ts.isObjectLiteralExpression(object)) return undefined;
  const property = object.properties.find((p) => p.name !== undefined && propertyKey(p.name) === key);
  return property ? locOf(info, property) : undefined;
}

/** How a non-static argument reads in a problem: "a call (...)", "the variable ...". */
export function describeArg(node: TS.Expression, source: TS.SourceFile, identifierNote = ""): string {
  const expr = unwrapExpression(node);
  const text = expr.getText(source).replace(/\s+/g, " ");
  const short = text.length > 40 ? `${text.slice(0, 37)}...` : text;
  if (ts.isCallExpression(expr)) return `a call (${short})`;
  if (ts.isIdentifier(expr)) return `the variable "${short}"${identifierNote}`;
  if (ts.isTemplateExpression(expr)) return `a template literal with substitutions (${short})`;
  return `"${short}"`;
}

function configFix(message: string): string {
  if (message.startsWith("unknown configuration key")) return "remove the key or correct its spelling";
  if (message.includes("mutually exclusive")) return 'keep either "gpu" or "cpu", not both';
  if (message.includes("unknown GPU type")) return 'write a GPU pool id, an exact card name or "ANY" (docs/gpus.md lists them)';
  if (message.startsWith('"name"')) return 'use a name like "gpu-worker" (lowercase letters, digits, dashes)';
  return "correct the value as the message describes (see docs/endpoint-definitions.md)";
}
