// The records of static discovery: what it finds (DiscoveredEndpoint and its functions and routes) and what its
// analyzer collects on the way (configuration sites, Endpoint(...) objects and their uses), with how a place in
// the sources is named in a problem ("file:line: what. Fix: how") and ordered. Apart so that the analyzer
// (discover.ts), the reading of configurations (discover-config.ts) and the grouping into endpoints
// (discover-endpoints.ts) share them without importing each other.

import type ts from "typescript";
import type { SourceLocation } from "../errors.js";
import type { EndpointConfig, FunctionKind, HttpMethod, NormalizedConfig } from "svc/internal";
import type { ModuleInfo } from "./discover-module.js";

export interface DiscoveredFunction {
  name: string;
  exportName: string;
  module: string;
  kind: FunctionKind;
  className?: string;
  loc: SourceLocation;
  anonymous: boolean;
  /** An input built from the first parameter's TypeScript type (src/build/example-input.ts); absent without one. */
  exampleInput?: unknown;
}
export interface DiscoveredRoute {
  method: HttpMethod;
  path: string;
  name: string;
  loc: SourceLocation;
}
export interface DiscoveredEndpoint {
  name: string;
  type: "queue" | "lb";
  rawConfig: EndpointConfig;
  config: NormalizedConfig;
  /** Queue endpoints (sorted by name). */
  functions: DiscoveredFunction[];
  /** LB endpoints (sorted by "METHOD /path"). Routes may be added in other modules than `lbExport.module`: see loc.file. */
  routes: DiscoveredRoute[];
  /** LB endpoints: where the Endpoint(...) object is exported. */
  lbExport?: { module: string; exportName: string };
  /** The Endpoint({...}) config site. */
  definedAt: SourceLocation;
}
export interface DiscoveryResult {
  root: string;
  files: string[];
  endpoints: DiscoveredEndpoint[];
  warnings: string[];
}
export interface DiscoverOptions {
  /** Extra gitignore-style patterns, relative to the root. */
  ignore?: string[];
}
export interface Site {
  key: string;
  loc: SourceLocation;
  raw?: EndpointConfig;
  valid: boolean;
  defs: DefInstance[];
}

export interface FunctionUse extends DiscoveredFunction {
  exported: boolean;
}
export interface RouteUse {
  method: HttpMethod;
  path: string;
  handlerName?: string;
  loc: SourceLocation;
}
export interface DefInstance {
  module: ModuleInfo;
  node: ts.CallExpression;
  loc: SourceLocation;
  site: Site | null;
  functions: FunctionUse[];
  routes: RouteUse[];
  /** Applied to a function or class, or given a route (even an invalid one). */
  used: boolean;
  appliedAt?: SourceLocation;
}

/** Where `node` is in `module`, 1-based. */
export function locOf(module: ModuleInfo, node: ts.Node): SourceLocation {
  const { line, character } = module.source.getLineAndCharacterOfPosition(node.getStart(module.source));
  return { file: module.file, line: line + 1, column: character + 1 };
}

export function at(loc: SourceLocation): string {
  return `${loc.file}:${loc.line}`;
}

export function problem(loc: SourceLocation, what: string, fix: string): string {
  return `${at(loc)}: ${what}. Fix: ${fix}`;
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function compareLoc(a: SourceLocation, b: SourceLocation): number {
  return compareStrings(a.file, b.file) || a.line - b.line || (a.column ?? 0) - (b.column ?? 0);
}

/** Sort "file:line: ..." messages by file, then line (numerically), then text. */
export function compareMessages(a: string, b: string): number {
  const pa = /^(.*?):(\d+): /.exec(a);
  const pb = /^(.*?):(\d+): /.exec(b);
  if (pa && pb) return compareStrings(pa[1]!, pb[1]!) || Number(pa[2]) - Number(pb[2]) || compareStrings(a, b);
  return compareStrings(a, b);
}
