// Which packages stay out of the artifact: only those named with `--exclude`. They stay external in the bundle,
// so the worker must provide them at run time.
//
// Nothing is excluded by default. The worker images (src/drivers/images.ts) carry Node and svc's own runtime
// packages under /opt/svc/node_modules, which only the runtime resolves: a handler's bundle is extracted
// elsewhere, so none of those packages is importable by user code, and leaving one out of an artifact would
// break the endpoint at run time.

import { packageNameOf } from "./dependencies.js";

export interface ExclusionPlan {
  /** Every excluded package name (those given with --exclude), sorted. */
  excluded: string[];
  /** Per endpoint: its configured dependency specs that will be installed. */
  install: Record<string, string[]>;
  warnings: string[];
}

/** Split user `--exclude a,b` values (repeatable) into trimmed names. */
export function parseExcludeList(values: readonly string[] | undefined): string[] {
  const names = new Set<string>();
  for (const value of values ?? []) {
    for (const part of value.split(",")) {
      const name = part.trim();
      if (name) names.add(name);
    }
  }
  return [...names];
}

/**
 * Decide what each endpoint installs. `dependencies` maps endpoint name to its configured specs;
 * `importedPackages` lists package names the bundles import (for the "matches nothing" check).
 */
export function planExclusions(
  dependencies: Record<string, readonly string[]>,
  userExcludes: readonly string[],
  importedPackages: ReadonlySet<string> = new Set(),
): ExclusionPlan {
  const excludedSet = new Set(userExcludes);
  const warnings: string[] = [];
  const install: Record<string, string[]> = {};
  const used = new Set<string>();
  for (const endpoint of Object.keys(dependencies).sort()) {
    install[endpoint] = [];
    for (const spec of dependencies[endpoint] ?? []) {
      const name = packageNameOf(spec);
      used.add(name);
      if (excludedSet.has(name)) {
        warnings.push(`endpoint "${endpoint}": dependency "${spec}" is not installed: it is excluded with --exclude`);
      } else {
        install[endpoint]!.push(spec);
      }
    }
  }
  for (const name of userExcludes) {
    if (!used.has(name) && !importedPackages.has(name)) {
      warnings.push(`--exclude ${name} matches no dependency or import of any endpoint`);
    }
  }
  return { excluded: [...excludedSet].sort(), install, warnings };
}
