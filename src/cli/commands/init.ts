// `svc init [dir] [--template name]`: write a project template (templates/<name>, default "starter") into a
// directory. Refuses to overwrite existing files unless --force.

import { existsSync, statSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import type { Command } from "commander";
import { UsageError, UserError } from "../../errors.js";
import { SVC_PACKAGE_ROOT, SVC_VERSION } from "../../version.js";
import { createOutput } from "../output.js";

export const STARTER_DIR = join(SVC_PACKAGE_ROOT, "templates", "starter");

/** The project templates `svc init --template` offers (each a folder under templates/). */
export const TEMPLATES: Record<string, string> = {
  starter: "GPU, streaming, class and load-balanced endpoints",
  textgen: "a text-generation endpoint with the OpenAI-compatible chat route (a small model, no download)",
};

// npm never publishes files named .gitignore, so the template stores it without the dot.
const RENAMES: Record<string, string> = { gitignore: ".gitignore" };

export interface StarterFile {
  path: string;
  contents: string;
}

/** A package name npm accepts, from a directory name. */
export function packageNameFor(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[._-]+|[-]+$/g, "");
  return name || "svc-app";
}

/**
 * The starter's files with placeholders filled in (pure). `svcVersion` is the version both packages are asked for
 * (the SDK `svc` and the CLI `svc-cli` are released together): a version range, so the project installs anywhere.
 */
export function renderStarter(templates: readonly StarterFile[], values: { name: string; svcVersion: string }): StarterFile[] {
  return templates.map((file) => ({
    path: RENAMES[file.path] ?? file.path,
    contents: file.contents.replaceAll("{{name}}", values.name).replaceAll("{{svcVersion}}", values.svcVersion),
  }));
}

function kindOf(path: string): "file" | "directory" | undefined {
  try {
    return statSync(path).isDirectory() ? "directory" : "file";
  } catch {
    return undefined;
  }
}

/** A path the template cannot be written through: a file where a directory goes, or a directory where a file goes. */
function blockedPath(dir: string, files: readonly StarterFile[]): { path: string; is: string } | undefined {
  const directories = new Set<string>();
  for (const file of files) {
    for (let d = dirname(join(dir, file.path)); !directories.has(d); d = dirname(d)) {
      directories.add(d);
      if (dirname(d) === d) break;
    }
  }
  for (const d of [...directories].sort()) if (kindOf(d) === "file") return { path: d, is: "a file, not a directory" };
  for (const file of files) if (kindOf(join(dir, file.path)) === "directory") return { path: join(dir, file.path), is: "a directory, not a file" };
  return undefined;
}

async function readTemplates(dir: string, prefix = ""): Promise<StarterFile[]> {
  const files: StarterFile[] = [];
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) files.push(...(await readTemplates(join(dir, entry.name), rel)));
    else files.push({ path: rel, contents: await readFile(join(dir, entry.name), "utf8") });
  }
  return files;
}

export async function initProject(
  targetDir: string,
  options: { force?: boolean; template?: string } = {},
): Promise<{ dir: string; template: string; files: string[] }> {
  const template = options.template ?? "starter";
  if (!Object.hasOwn(TEMPLATES, template)) {
    throw new UsageError(`There is no template "${template}"`, `Pick one of: ${Object.keys(TEMPLATES).join(", ")}.`);
  }
  const dir = resolve(targetDir);
  const files = renderStarter(await readTemplates(join(SVC_PACKAGE_ROOT, "templates", template)), {
    name: packageNameFor(dir),
    svcVersion: SVC_VERSION,
  });
  // Checked before writing anything: a file where a directory must go (or the reverse) would fail half-way.
  const blocked = blockedPath(dir, files);
  if (blocked) {
    throw new UserError(`Cannot create the project in ${dir}: ${blocked.path} is ${blocked.is}`, {
      hint: "Give `svc init` a directory that is new or holds a project (`svc init <dir>`).",
    });
  }
  const existing = files.filter((f) => existsSync(join(dir, f.path))).map((f) => f.path);
  if (existing.length > 0 && !options.force) {
    throw new UserError(`${existing.length} file(s) of the ${template} template already exist in ${dir}`, {
      problems: existing,
      hint: "Pick an empty directory, or run `svc init --force` to overwrite them.",
    });
  }
  for (const file of files) {
    await mkdir(dirname(join(dir, file.path)), { recursive: true });
    await writeFile(join(dir, file.path), file.contents);
  }
  return { dir, template, files: files.map((f) => f.path) };
}

/** The svc checkout this CLI runs from (where `npm pack` makes its tarballs), or undefined for an installed CLI. */
export function svcCheckout(packageRoot: string): string | undefined {
  return existsSync(join(packageRoot, "packages", "svc", "package.json")) ? resolve(packageRoot) : undefined;
}

/**
 * How the new project gets svc and svc-cli: until both packages are published, `npm install` alone finds no
 * svc-cli (and an unrelated `svc`), so the two tarballs of the checkout this CLI runs from, by their real paths.
 * Pure.
 */
export function installSteps(checkout: string | undefined, version: string): string[] {
  const at = checkout ?? "<svc checkout>";
  return [
    `  npm install ${join(at, `svc-${version}.tgz`)} ${join(at, `svc-cli-${version}.tgz`)}`,
    `    (svc and svc-cli are not on the npm registry yet: make the two tarballs first with \`cd ${at} && npm pack -w svc && npm pack\` (svc's README, Quick start))`,
  ];
}

export function register(program: Command): void {
  program
    .command("init")
    .description("Create a project from a template (default: starter, with GPU, streaming, class and load-balanced endpoints)")
    .argument("[dir]", "directory to create it in", ".")
    .option(
      "--template <name>",
      `template: ${Object.entries(TEMPLATES)
        .map(([name, what]) => `${name} (${what})`)
        .join("; ")}`,
      "starter",
    )
    .option("--force", "overwrite files that already exist")
    .option("--json", "print the created files as JSON")
    .action(async (target: string, flags: { force?: boolean; json?: boolean; template: string }) => {
      const out = createOutput({ json: flags.json });
      const created = await initProject(target, { force: flags.force, template: flags.template });
      const shown = relative(process.cwd(), created.dir) || ".";
      out.result(created, () =>
        [
          `Created a svc project in ${shown}:`,
          ...created.files.map((f) => `  ${f}`),
          "",
          "Next:",
          ...(shown === "." ? [] : [`  cd ${shown}`]),
          ...installSteps(svcCheckout(SVC_PACKAGE_ROOT), SVC_VERSION),
          "  npx svc build",
        ].join("\n"),
      );
    });
}
