import { describe, expect, it } from "vitest";
import { modelsProblems, normalizeModels, parseModelRef } from "svc/internal";
import { filePaths, formatBytes, listingBytes, listingProblems, progressText, refPath, repoFolderName } from "./layout.js";

const SHA = "a".repeat(64);
const BLOB = "b".repeat(40);
const COMMIT = "c".repeat(40);

describe("model references", () => {
  it("reads org/name@revision, main when no revision is given, and refuses what is no model", () => {
    expect(parseModelRef("openai-community/gpt2@main").ref).toEqual({ repo: "openai-community/gpt2", revision: "main" });
    expect(parseModelRef("acme/tiny").ref).toEqual({ repo: "acme/tiny", revision: "main" });
    expect(parseModelRef(`acme/tiny@${COMMIT}`).ref).toEqual({ repo: "acme/tiny", revision: COMMIT });
    expect(parseModelRef("acme/tiny@refs/pr/1").ref).toEqual({ repo: "acme/tiny", revision: "refs/pr/1" });
    expect(parseModelRef("gpt2").problem).toContain("write it as org/name@revision");
    expect(parseModelRef("a/b/c").problem).toContain("is not a model");
    expect(parseModelRef("../etc@main").problem).toContain("is not a model");
    expect(parseModelRef("acme/tiny@../../x").problem).toContain("names no valid revision");
    expect(parseModelRef("acme/tiny@").problem).toContain("names no valid revision");
    expect(modelsProblems("acme/tiny")).toEqual(['"models" must be a list of models such as ["org/name@main"]']);
    expect(modelsProblems(["acme/tiny", "nope"])).toEqual([
      '"models": "nope" is not a model: write it as org/name@revision, e.g. "openai-community/gpt2@main"',
    ]);
    expect(normalizeModels(["acme/tiny", "acme/tiny@main", "acme/big@v1"])).toEqual(["acme/tiny@main", "acme/big@v1"]);
  });
});

describe("the cache's layout (huggingface_hub's)", () => {
  it("names the repository folder, the blob by etag, the snapshot link relative to the blob, the ref of a branch", () => {
    expect(repoFolderName("acme/tiny")).toBe("models--acme--tiny");
    expect(filePaths("acme/tiny", COMMIT, { name: "model.safetensors", size: 1, etag: SHA })).toEqual({
      blob: `models--acme--tiny/blobs/${SHA}`,
      partial: `models--acme--tiny/blobs/${SHA}.incomplete`,
      link: `models--acme--tiny/snapshots/${COMMIT}/model.safetensors`,
      target: `../../blobs/${SHA}`,
    });
    expect(filePaths("acme/tiny", COMMIT, { name: "onnx/fp16/model.onnx", size: 1, etag: BLOB }).target).toBe(`../../../../blobs/${BLOB}`);
    expect(refPath({ repo: "acme/tiny", revision: "main" }, COMMIT)).toBe("models--acme--tiny/refs/main");
    expect(refPath({ repo: "acme/tiny", revision: COMMIT }, COMMIT)).toBeUndefined();
  });

  it("refuses a listing whose file names leave the snapshot or whose hashes are not hashes", () => {
    expect(listingProblems({ commit: COMMIT, files: [{ name: "a/b.bin", size: 3, etag: SHA, sha256: SHA }] })).toEqual([]);
    expect(
      listingProblems({
        commit: "main",
        files: [
          { name: "../../../etc/passwd", size: 1, etag: BLOB },
          { name: "/abs", size: 1, etag: BLOB },
          { name: "x", size: -1, etag: "zz" },
        ],
      }),
    ).toEqual([
      'the hub named commit "main", which is not a 40-digit hash',
      'the hub listed a file "../../../etc/passwd" whose path leaves the snapshot',
      'the hub listed a file "/abs" whose path leaves the snapshot',
      'the hub gave file "x" the etag "zz", which is no hash',
      'the hub gave file "x" no size',
    ]);
  });

  it("counts a blob two names share once, and says progress in the total's unit", () => {
    expect(
      listingBytes({
        commit: COMMIT,
        files: [
          { name: "a", size: 10, etag: SHA },
          { name: "b", size: 10, etag: SHA },
          { name: "c", size: 5, etag: BLOB },
        ],
      }),
    ).toBe(15);
    expect(progressText(120e6, 200e6)).toBe("120 of 200 MB");
    expect(progressText(1.25e9, 4.5e9)).toBe("1.3 of 4.5 GB");
    expect(formatBytes(900)).toBe("900 B");
    expect(formatBytes(15e9)).toBe("15 GB");
  });
});
