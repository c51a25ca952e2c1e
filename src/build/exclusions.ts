// Which packages stay out of the artifact. Base-image packages are preinstalled in every worker image (GPU and
// CPU), so the build never installs them; `--exclude` adds more. Excluded packages stay external in the bundle:
// the worker resolves them at run time from its image.

import { packageNameOf } from "./dependencies.js";

/** Preinstalled in every worker base image (the spec's list); never installed into an artifact. */
export const BASE_IMAGE_PACKAGES: readonly string[] = ["torch", "torchvision", "torchaudio", "numpy", "triton"];

export interface ExclusionPlan {
  /** Every excluded package name (base image + user), sorted. */
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
  const excludedSet = new Set([...BASE_IMAGE_PACKAGES, ...userExcludes]);
  const warnings: string[] = [];
  const install: Record<string, string[]> = {};
  const used = new Set<string>();
  for (const endpoint of Object.keys(dependencies).sort()) {
    install[endpoint] = [];
    for (const spec of dependencies[endpoint] ?? []) {
      const name = packageNameOf(spec);
      used.add(name);
      if (excludedSet.has(name)) {
        const why = BASE_IMAGE_PACKAGES.includes(name) ? "it is preinstalled in the worker base image" : "it is excluded with --exclude";
        warnings.push(`endpoint "${endpoint}": dependency "${spec}" is not installed: ${why}`);
      } else {
        install[endpoint]!.push(spec);
      }
    }
  }
  for (const name of userExcludes) {
    if (!used.has(name) && !importedPackages.has(name) && !BASE_IMAGE_PACKAGES.includes(name)) {
      warnings.push(`--exclude ${name} matches no dependency or import of any endpoint`);
    }
  }
  return { excluded: [...excludedSet].sort(), install, warnings };
}
