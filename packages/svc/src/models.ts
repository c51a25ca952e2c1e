// Models an endpoint names (`models: ["org/name@revision"]`): each host fetches each named revision once from a
// Hugging Face-compatible hub into its model cache, and the endpoint's workers find it there offline
// (docs/models.md). One definition of what a model reference is, for the SDK's check, the build and the service.

/** A model as the hub names it: its repository ("org/name") and a revision (a branch, a tag or a commit). */
export interface ModelRef {
  repo: string;
  revision: string;
}

/** The revision a reference without one names. */
export const DEFAULT_MODEL_REVISION = "main";

const REPO_PART = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$/;
const REVISION = /^[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;

/** "org/name@revision" (or "org/name", the main branch) as a reference, or why it is not one. Pure. */
export function parseModelRef(text: string): { ref: ModelRef; problem?: undefined } | { ref?: undefined; problem: string } {
  const at = text.indexOf("@");
  const repo = at < 0 ? text : text.slice(0, at);
  const revision = at < 0 ? DEFAULT_MODEL_REVISION : text.slice(at + 1);
  const parts = repo.split("/");
  if (parts.length !== 2 || !parts.every((p) => REPO_PART.test(p) && !p.includes("..") && !p.includes("--"))) {
    return { problem: `"${text}" is not a model: write it as org/name@revision, e.g. "openai-community/gpt2@main"` };
  }
  if (!REVISION.test(revision) || revision.split("/").some((p) => p === "." || p === "..") || revision.length > 200) {
    return { problem: `"${text}" names no valid revision after "@" (a branch, a tag or a commit hash)` };
  }
  return { ref: { repo, revision } };
}

/** A reference as users write it and the service shows it: "org/name@revision". Pure. */
export function modelRefText(ref: ModelRef): string {
  return `${ref.repo}@${ref.revision}`;
}

/** What is wrong with an endpoint's `models` setting (empty: nothing). Pure. */
export function modelsProblems(models: unknown, where = '"models"'): string[] {
  if (!Array.isArray(models) || !models.every((m) => typeof m === "string")) return [`${where} must be a list of models such as ["org/name@main"]`];
  const problems: string[] = [];
  for (const m of models as string[]) {
    const parsed = parseModelRef(m);
    if (parsed.problem) problems.push(`${where}: ${parsed.problem}`);
  }
  if (models.length > 32) problems.push(`${where} names ${models.length} models; at most 32`);
  return problems;
}

/** The models of a `models` setting, each once, as "org/name@revision" (a missing revision made explicit). Pure. */
export function normalizeModels(models: readonly string[]): string[] {
  return [...new Set(models.map((m) => modelRefText(parseModelRef(m).ref!)))];
}
