// `svc models fetch --cache <dir> [--hub <url>] <model>...`: fetch models into a model cache laid out as
// huggingface_hub lays out its own (docs/models.md), through the same cache the service keeps on its host. What a
// cluster node runs before its workers (a Pod's init container, a Swarm job: docs/models.md "Node caches"); several
// at once on one directory download each file once (the cache's lock per model repository). A model already in
// the cache costs no request to the hub. Progress on stderr; `--json`: the models on stdout.

import type { Command } from "commander";
import { envSetting, modelsProblems, normalizeModels } from "svc/internal";
import { UsageError, UserError, errorMessage } from "../../errors.js";
import { ModelCache, type ModelStatus } from "../../service/models/cache.js";
import { DEFAULT_MODEL_HUB, Hub, ModelFetchError } from "../../service/models/hub.js";
import { formatBytes, progressText } from "../../service/models/layout.js";
import { createOutput } from "../output.js";

/**
 * One model as `--json` prints it: `fetched` came from the hub in this run, `ready` was in the cache already (or
 * another fetcher on the same cache brought it meanwhile).
 */
export interface FetchedModel {
  model: string;
  commit: string;
  bytes: number;
  state: "ready" | "fetched";
}

const PROGRESS_MS = 500;

export function register(program: Command): void {
  const models = program.command("models").description("Model caches: fetch Hugging Face models where workers read them offline (docs/models.md)");
  models
    .command("fetch")
    .description("Fetch models into a model cache (HF_HOME) in huggingface_hub's layout; those already there are not asked for again")
    .argument("<model...>", "models as org/name@revision (a branch, tag or commit; org/name alone: @main)")
    .requiredOption("--cache <dir>", "the cache's directory (HF_HOME; made when missing)")
    .option("--hub <url>", `the Hugging Face-compatible hub (or $SVC_MODEL_HUB; default ${DEFAULT_MODEL_HUB}); its token: $SVC_MODEL_HUB_TOKEN`)
    .option("--json", "print {models: [{model, commit, bytes, state}]} on stdout")
    .action(async (names: string[], opts: { cache: string; hub?: string; json?: boolean }) => {
      const out = createOutput({ json: opts.json });
      const problems = modelsProblems(names, "model");
      if (problems.length > 0) throw new UsageError(problems.join("; "), 'Name each model as org/name@revision, e.g. "openai-community/gpt2@main".');
      const wanted = normalizeModels(names);
      const hubUrl = opts.hub ?? envSetting("SVC_MODEL_HUB") ?? DEFAULT_MODEL_HUB;
      const say = (line: string) => process.stderr.write(`${line}\n`);
      let cache: ModelCache;
      try {
        cache = new ModelCache({
          root: opts.cache,
          hub: new Hub({ url: hubUrl, token: envSetting("SVC_MODEL_HUB_TOKEN") }),
          // The node's cache is not evicted by size (docs/models.md): nothing is given as a limit.
          onEvent: (message) => {
            if (/waiting for it|broke off|fetched by another process/.test(message)) say(message);
          },
        });
      } catch (err) {
        throw new UserError(`Cannot use ${opts.cache} as a model cache: ${errorMessage(err)}`, {
          hint: "Give --cache a directory this process may create and write (the node's cache path, mounted read-write).",
          cause: err,
        });
      }
      const tty = Boolean(process.stderr.isTTY) && !out.json;
      const progress = tty ? setInterval(() => process.stderr.write(`\r\x1b[K${progressLine(cache.list(), wanted)}`), PROGRESS_MS) : undefined;
      const results = await Promise.allSettled(wanted.map((model) => cache.ensure(model)));
      if (progress) {
        clearInterval(progress);
        process.stderr.write("\r\x1b[K");
      }
      const after = new Map(cache.list().map((m) => [m.model, m]));
      const fetched: FetchedModel[] = [];
      const failed: Array<{ model: string; error: ModelFetchError }> = [];
      wanted.forEach((model, i) => {
        const result = results[i]!;
        const status = after.get(model);
        if (result.status === "fulfilled" && status?.state === "ready") {
          const entry: FetchedModel = { model, commit: status.commit!, bytes: status.bytes!, state: cache.fetchedHere(model) ? "fetched" : "ready" };
          fetched.push(entry);
          say(`${model}: ${entry.state === "ready" ? "in the cache already" : "fetched"} (commit ${entry.commit}, ${formatBytes(entry.bytes)})`);
          return;
        }
        const reason = result.status === "rejected" ? result.reason : new Error("it is not in the cache after its fetch");
        const error = reason instanceof ModelFetchError ? reason : new ModelFetchError("disk_error", errorMessage(reason));
        failed.push({ model, error });
        say(`${model}: cannot be fetched from ${cache.hubUrl}: ${error.code}: ${error.message}`);
      });
      if (failed.length > 0) {
        const first = failed[0]!;
        throw new UserError(
          `${failed.length === 1 ? `Model ${first.model} cannot` : `${failed.length} models cannot`} be fetched from ${cache.hubUrl}: ${failed.map((f) => `${f.model}: ${f.error.code}: ${f.error.message}`).join("; ")}`,
          { hint: hintOf(first.error.code), problems: [] },
        );
      }
      // The lines above said it all on stderr: stdout carries the models only when asked for as JSON.
      if (out.json) out.result({ models: fetched }, () => "");
    });
}

/** "2 models: 120 of 548 MB" from what the cache says of the models being fetched. Pure. */
export function progressLine(statuses: readonly ModelStatus[], wanted: readonly string[]): string {
  const mine = statuses.filter((s) => wanted.includes(s.model));
  const fetching = mine.filter((s) => s.state === "fetching");
  const done = fetching.reduce((n, s) => n + (s.doneBytes ?? 0), 0);
  const total = fetching.reduce((n, s) => n + (s.totalBytes ?? 0), 0);
  const ready = mine.filter((s) => s.state === "ready").length;
  return `${ready} of ${wanted.length} models ready${fetching.length > 0 && total > 0 ? `; fetching ${fetching.length}: ${progressText(done, total)}` : ""}`;
}

function hintOf(code: ModelFetchError["code"]): string {
  switch (code) {
    case "unauthorized":
      return "Give a token of the hub that may read it in SVC_MODEL_HUB_TOKEN.";
    case "not_found":
      return "Check the model's name and revision on the hub (or the mirror --hub / SVC_MODEL_HUB names).";
    case "hub_unreachable":
      return "Check that this machine reaches the hub (--hub / SVC_MODEL_HUB), then run it again: what arrived is resumed.";
    case "disk_error":
      return "Check that the cache's directory is writable and has room.";
    default:
      return "Run it again later; if it keeps failing, check the hub (or mirror) serves the model intact.";
  }
}
