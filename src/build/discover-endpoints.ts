// Grouping what discovery found into endpoints, and the rules that hold across files: one configuration site per
// endpoint name, a queue endpoint's functions uniquely named and exported, a load-balanced endpoint's routes on one
// exported object, valid and unique paths. Apart from the analyzer (discover.ts): it reads only the records the
// analyzer collected, never the sources.

import { normalizeConfig, type EndpointConfig, type HttpMethod, type NormalizedConfig, RESERVED_ROUTE_PATHS } from "svc/internal";
import {
  at,
  compareLoc,
  compareStrings,
  problem,
  type DefInstance,
  type DiscoveredEndpoint,
  type DiscoveredFunction,
  type FunctionUse,
  type RouteUse,
  type Site,
} from "./discover-records.js";

/** The endpoints of the collected sites and definitions; problems and warnings go to the arrays given. */
export class EndpointGrouping {
  constructor(
    private readonly problems: string[],
    private readonly warnings: string[],
    /** Where a definition object is exported, if anywhere. */
    private readonly exportOfDefinition: (def: DefInstance) => { module: string; exportName: string } | undefined,
  ) {}

  endpoints(sites: Iterable<Site>, defs: Iterable<DefInstance>): DiscoveredEndpoint[] {
    const byName = new Map<string, Site[]>();
    for (const site of sites) {
      if (!site.valid || !site.raw) continue;
      const list = byName.get(site.raw.name) ?? [];
      list.push(site);
      byName.set(site.raw.name, list);
    }
    for (const def of defs) {
      // An image endpoint is whole without a handler: its image runs the jobs.
      if (!def.used && def.site?.valid && def.site.raw!.image === undefined) {
        this.problems.push(
          problem(
            def.loc,
            `Endpoint({ name: "${def.site.raw!.name}" }) is never applied to a function or class, has no routes and names no image`,
            `apply it with a second call, e.g. \`export const fn = Endpoint({...})(async function fn(input) {...})\`, decorate a class with it, add routes with .get/.post(...), or give it the container image that runs its jobs: \`Endpoint({ name: "${def.site.raw!.name}", image: "my/worker:1.0" })\``,
          ),
        );
      }
    }
    const result: DiscoveredEndpoint[] = [];
    for (const name of [...byName.keys()].sort()) {
      const sites = byName.get(name)!.sort((a, b) => compareLoc(a.loc, b.loc));
      const endpoint = this.endpoint(name, sites);
      if (endpoint) result.push(endpoint);
    }
    return result;
  }

  private endpoint(name: string, sites: Site[]): DiscoveredEndpoint | undefined {
    const kindOf = (site: Site) => {
      const defs = site.defs;
      const routes = defs.some((d) => d.routes.length > 0);
      const applied = defs.some((d) => d.appliedAt !== undefined);
      return routes && !applied ? "lb" : applied && !routes ? "queue" : undefined;
    };
    if (sites.length > 1) {
      const first = sites[0]!;
      for (const other of sites.slice(1)) {
        const kinds = [kindOf(first), kindOf(other)];
        if (kinds.includes("lb") && kinds.includes("queue")) {
          this.problems.push(
            problem(
              other.loc,
              `endpoint name "${name}" is used for both a load-balanced endpoint and a queue endpoint (${kinds[0] === "lb" ? "load-balanced" : "queue"} one at ${at(first.loc)})`,
              "give the load-balanced endpoint and the queue endpoint different names",
            ),
          );
        } else {
          this.problems.push(
            problem(
              other.loc,
              `the configuration of endpoint "${name}" is defined in more than one place (also at ${at(first.loc)})`,
              `define it once, e.g. \`export const gpu = Endpoint({ name: "${name}", ... })\`, and apply it to each function (\`export const a = gpu(fnA)\`)`,
            ),
          );
        }
      }
      return undefined;
    }
    const site = sites[0]!;
    const defs = site.defs;
    const functions = defs.flatMap((d) => d.functions).sort(compareFunctions);
    const routeDefs = defs.filter((d) => d.routes.length > 0);
    const applied = defs.filter((d) => d.appliedAt !== undefined);
    if (routeDefs.length > 0 && applied.length > 0) {
      const routeLoc = routeDefs[0]!.routes[0]!.loc;
      this.problems.push(
        problem(
          applied[0]!.appliedAt!,
          `endpoint "${name}" is used both as a queue endpoint (applied to a function or class here) and as a load-balanced endpoint (route at ${at(routeLoc)})`,
          "use separate endpoints: one name for the queue functions, another for the HTTP routes",
        ),
      );
      return undefined;
    }
    const rawConfig = site.raw!;
    if (rawConfig.image !== undefined) return this.imageEndpoint(name, site, rawConfig, applied, routeDefs);
    if (routeDefs.length === 0 && applied.length === 0) return undefined; // reported as never applied
    const config = normalizeConfig(rawConfig);
    if (applied.length > 0) return this.queueEndpoint(name, site, rawConfig, config, functions);
    return this.lbEndpoint(name, site, rawConfig, config, routeDefs);
  }

  /** `Endpoint({ name, image })`: a queue endpoint whose image runs its jobs; it takes no function, class or route. */
  private imageEndpoint(name: string, site: Site, rawConfig: EndpointConfig, applied: DefInstance[], routeDefs: DefInstance[]): DiscoveredEndpoint | undefined {
    const handlerAt = applied[0]?.appliedAt ?? routeDefs[0]?.routes[0]?.loc;
    if (handlerAt) {
      this.problems.push(
        problem(
          handlerAt,
          `endpoint "${name}" names an image ("${rawConfig.image}") and is also given ${applied.length > 0 ? "a function or class" : "a route"} here: an image endpoint's container runs its jobs, so it takes no handler`,
          `either remove "image" to run this code, or keep the image and remove the handler (\`export const ${name.replace(/-./g, (m) => m[1]!.toUpperCase())} = Endpoint({ name: "${name}", image: "${rawConfig.image}" })\`)`,
        ),
      );
      return undefined;
    }
    return { name, type: "queue", rawConfig, config: normalizeConfig(rawConfig), functions: [], routes: [], definedAt: site.loc };
  }

  private queueEndpoint(name: string, site: Site, rawConfig: EndpointConfig, config: NormalizedConfig, uses: FunctionUse[]): DiscoveredEndpoint | undefined {
    let ok = true;
    const seen = new Map<string, FunctionUse>();
    for (const use of uses) {
      if (!use.exported) ok = false; // reported where it was applied
      const previous = seen.get(use.name);
      if (previous) {
        ok = false;
        const [first, second] = compareLoc(previous.loc, use.loc) <= 0 ? [previous, use] : [use, previous];
        this.problems.push(
          problem(
            second.loc,
            `endpoint "${name}" has two functions named "${use.name}" (the other at ${at(first.loc)}); each function of a queue endpoint needs a unique name`,
            "rename one of the functions (its own name, or its export name for arrow functions)",
          ),
        );
      } else {
        seen.set(use.name, use);
      }
    }
    if (uses.length > 1) {
      for (const use of uses.filter((u) => u.anonymous)) {
        this.warnings.push(
          `${at(use.loc)}: endpoint "${name}" has ${uses.length} functions and "${use.name}" is an anonymous function, so scripts cannot name it when calling. Fix: use a named function, e.g. \`async function ${use.name}(input) {...}\``,
        );
      }
    }
    if (!ok) return undefined;
    const functions = uses.map(({ exported: _exported, ...fn }) => fn);
    return { name, type: "queue", rawConfig, config, functions, routes: [], definedAt: site.loc };
  }

  private lbEndpoint(name: string, site: Site, rawConfig: EndpointConfig, config: NormalizedConfig, routeDefs: DefInstance[]): DiscoveredEndpoint | undefined {
    let ok = true;
    if (routeDefs.length > 1) {
      this.problems.push(
        problem(
          routeDefs[1]!.loc,
          `load-balanced endpoint "${name}" gets routes on two different Endpoint(...) objects (the other created at ${at(routeDefs[0]!.loc)}); only one can be served`,
          `create it once, \`export const api = Endpoint({ name: "${name}", ... })\`, and add every route to that object`,
        ),
      );
      return undefined;
    }
    const def = routeDefs[0]!;
    const lbExport = this.exportOfDefinition(def);
    if (!lbExport) {
      ok = false;
      this.problems.push(
        problem(
          def.loc,
          `load-balanced endpoint "${name}" is not exported; the generated handler must import it`,
          `export the object: \`export const api = Endpoint({ name: "${name}", ... })\``,
        ),
      );
    }
    const routes = [...def.routes].sort((a, b) => compareStrings(routeKey(a), routeKey(b)) || compareLoc(a.loc, b.loc));
    const byKey = new Map<string, RouteUse>();
    for (const route of routes) {
      const key = routeKey(route);
      if (!route.path.startsWith("/")) {
        ok = false;
        this.problems.push(problem(route.loc, `route path "${route.path}" must start with "/"`, `write it as "/${route.path}"`));
      } else if ((RESERVED_ROUTE_PATHS as readonly string[]).includes(route.path)) {
        ok = false;
        this.problems.push(
          problem(
            route.loc,
            `route ${key} uses the reserved path ${route.path} (svc serves it for health checks)`,
            "choose another path, e.g. /health or /status",
          ),
        );
      }
      const previous = byKey.get(key);
      if (previous) {
        ok = false;
        this.problems.push(
          problem(route.loc, `route ${key} is defined twice on endpoint "${name}" (the other at ${at(previous.loc)})`, "keep one handler per method and path"),
        );
      } else {
        byKey.set(key, route);
      }
    }
    if (!ok) return undefined;
    const used = new Set<string>();
    const discovered = routes.map((route) => {
      const base = route.handlerName ?? `${route.method.toLowerCase()}_${pathSlug(route.path)}`;
      let routeName = base;
      for (let n = 2; used.has(routeName); n++) routeName = `${base}_${n}`;
      used.add(routeName);
      return { method: route.method, path: route.path, name: routeName, loc: route.loc };
    });
    return { name, type: "lb", rawConfig, config, functions: [], routes: discovered, lbExport, definedAt: site.loc };
  }
}

function routeKey(route: { method: HttpMethod; path: string }): string {
  return `${route.method} ${route.path}`;
}

/** "/items/:id" -> "items_id"; "/" -> "root". */
export function pathSlug(routePath: string): string {
  const slug = routePath
    .split("/")
    .map((segment) => segment.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_+|_+$/g, ""))
    .filter((segment) => segment.length > 0)
    .join("_");
  return slug.length > 0 ? slug : "root";
}

function compareFunctions(a: DiscoveredFunction, b: DiscoveredFunction): number {
  return compareStrings(a.name, b.name) || compareLoc(a.loc, b.loc);
}
