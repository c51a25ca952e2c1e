// templates/textgen through the real `svc build`, then its bundled handler run in-process: the artifact
// carries the endpoint, the SDK's textGeneration() and the corpus, and answers an OpenAI chat job.

import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatJobInput, chatCompletionFromOutput } from "../../src/openai/format.js";
import { chunkMetrics, type LoadedHandler, type TextGenerationOutput } from "svc/internal";
import { SVC_VERSION } from "../../src/version.js";

const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const temp = mkdtempSync(join(tmpdir(), "svc-textgen-"));
const project = join(temp, "my-textgen");
let build: { code: number; stdout: string; stderr: string };
let handler: LoadedHandler;

beforeAll(async () => {
  if (!existsSync(join(REPO, "dist", "cli", "main.js"))) throw new Error("svc is not compiled: run `npx tsc -p tsconfig.build.json` first");
  const svc = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((done) =>
      execFile(process.execPath, [join(REPO, "bin", "svc.js"), ...args], { env: { ...process.env, NO_COLOR: "1" } }, (error, stdout, stderr) =>
        done({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      ),
    );
  const init = await svc(["init", project, "--template", "textgen", "--json"]);
  if (init.code !== 0) throw new Error(`svc init --template textgen failed: ${init.stderr}`);
  expect(JSON.parse(init.stdout)).toMatchObject({ template: "textgen" });
  expect(JSON.parse(readFileSync(join(project, "package.json"), "utf8"))).toMatchObject({
    name: "my-textgen",
    dependencies: { svc: `^${SVC_VERSION}` },
    devDependencies: { "svc-cli": `^${SVC_VERSION}` },
  });
  build = await svc(["build", "-C", project]);
  if (build.code === 0) {
    const unpacked = join(temp, "artifact");
    mkdirSync(unpacked, { recursive: true });
    execFileSync("tar", ["-xzf", join(project, ".svc", "artifact.tar.gz"), "-C", unpacked]);
    handler = ((await import(pathToFileURL(join(unpacked, "endpoints", "textgen", "handler.mjs")).href)) as { default: LoadedHandler }).default;
    await handler.init();
  }
});

afterAll(() => rmSync(temp, { recursive: true, force: true }));

async function run(input: unknown): Promise<TextGenerationOutput[]> {
  const invoked = handler.invoke("chat", input, { jobId: "job-1", signal: new AbortController().signal });
  if (invoked.kind !== "stream") throw new Error("expected a streaming function");
  const chunks: TextGenerationOutput[] = [];
  for await (const chunk of invoked.stream) chunks.push(chunk as TextGenerationOutput);
  return chunks;
}

describe("templates/textgen", () => {
  it("builds with svc build into one streaming endpoint", () => {
    expect(build.stderr).not.toMatch(/error/i);
    expect(build.code).toBe(0);
    expect(build.stdout).toContain("textgen (queue, gpu ANY, workers 0-1)");
    const manifest = JSON.parse(readFileSync(join(project, ".svc", "svc_manifest.json"), "utf8"));
    expect(manifest.resources.textgen.functions).toEqual([
      expect.objectContaining({ name: "chat", kind: "generator-method", class: "TextGen", module: "src/textgen.ts" }),
    ]);
  });

  it("answers an OpenAI chat job from the artifact, deterministic with a seed", async () => {
    const request = {
      model: "textgen",
      messages: [{ role: "user" as const, content: "Tell me about the lighthouse keeper" }],
      stream: false,
      seed: 4,
      max_tokens: 40,
    };
    const chunks = await run(chatJobInput(request));
    const last = chunks.at(-1)!;
    expect(["stop", "length"]).toContain(last.finish_reason);
    expect(last.output_tokens).toBeLessThanOrEqual(40);
    expect(chunkMetrics(chunks[0])).toMatchObject({ scenario: "openai-chat", stream_index: 0 });
    const reply = chatCompletionFromOutput(JSON.parse(JSON.stringify(chunks)), request);
    expect(reply.choices[0]!.message.content!.length).toBeGreaterThan(20);
    expect(reply.usage.completion_tokens).toBe(last.output_tokens);
    const again = chatCompletionFromOutput(JSON.parse(JSON.stringify(await run(chatJobInput(request)))), request);
    expect(again.choices[0]!.message.content).toBe(reply.choices[0]!.message.content);
  });

  it("trains, once per worker, on the volume's textgen/corpus.txt when there is one", async () => {
    const volume = join(temp, "volume");
    mkdirSync(join(volume, "textgen"), { recursive: true });
    writeFileSync(join(volume, "textgen", "corpus.txt"), "zebra quartz zebra quartz. quartz zebra quartz zebra. ".repeat(20));
    const before = process.env.SVC_VOLUME_PATH;
    process.env.SVC_VOLUME_PATH = volume;
    try {
      // A fresh copy of the bundle: a new worker, whose constructor runs now.
      const url = pathToFileURL(join(temp, "artifact", "endpoints", "textgen", "handler.mjs")).href;
      const worker = ((await import(`${url}?worker=2`)) as { default: LoadedHandler }).default;
      await worker.init();
      const invoked = worker.invoke("chat", { prompt: "tell me", seed: 3, max_tokens: 20 }, { jobId: "job-2", signal: new AbortController().signal });
      if (invoked.kind !== "stream") throw new Error("expected a streaming function");
      let text = "";
      for await (const chunk of invoked.stream) text += (chunk as TextGenerationOutput).text.join("");
      const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
      expect(words.length).toBeGreaterThan(0);
      expect(new Set(words)).toEqual(new Set(words.filter((w) => w === "zebra" || w === "quartz")));
    } finally {
      if (before === undefined) delete process.env.SVC_VOLUME_PATH;
      else process.env.SVC_VOLUME_PATH = before;
    }
  });

  it("answers a plain {prompt} job and stops at a stop string", async () => {
    const chunks = await run({ prompt: "the harbour", stop: ["."], seed: 1 });
    const text = chunks.flatMap((c) => c.text).join("");
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(".");
    expect(chunks.at(-1)!.finish_reason).toBe("stop");
  });
});
