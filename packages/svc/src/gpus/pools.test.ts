import { describe, expect, it } from "vitest";
import {
  ANY_GPU,
  cardMatches,
  checkGpuId,
  GPU_POOLS,
  gpuTypeIdProblems,
  KNOWN_CARDS,
  nearestGpuIds,
  poolsOfCard,
  typeIdsOfCard,
  unknownGpuIdMessage,
} from "./pools.js";

// Written out by hand from RunPod's pool table (docs/gpus.md), not derived from GPU_POOLS: a card moved to the
// wrong pool, or a pool lost, fails here.
const EXPECTED: Array<[string, string[]]> = [
  ["AMPERE_16", ["NVIDIA RTX A4000", "NVIDIA RTX A4500", "NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 2000 Ada Generation"]],
  ["AMPERE_24", ["NVIDIA RTX A5000", "NVIDIA L4", "NVIDIA GeForce RTX 3090"]],
  ["ADA_24", ["NVIDIA GeForce RTX 4090"]],
  ["ADA_32_PRO", ["NVIDIA GeForce RTX 5090"]],
  ["AMPERE_48", ["NVIDIA A40", "NVIDIA RTX A6000"]],
  ["ADA_48_PRO", ["NVIDIA RTX 6000 Ada Generation", "NVIDIA L40", "NVIDIA L40S"]],
  ["AMPERE_80", ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"]],
  ["ADA_80_PRO", ["NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL"]],
  [
    "BLACKWELL_96",
    [
      "NVIDIA RTX PRO 6000 Blackwell Server Edition",
      "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
      "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ],
  ],
  ["HOPPER_141", ["NVIDIA H200"]],
  ["BLACKWELL_180", ["NVIDIA B200"]],
];

describe("GPU pools", () => {
  it("are exactly the provider's pools", () => {
    expect(GPU_POOLS.map((p) => p.id).sort()).toEqual(EXPECTED.map(([id]) => id).sort());
  });

  it.each(EXPECTED)("%s holds its cards, each card maps to it, and no other card matches it", (pool, cards) => {
    expect(GPU_POOLS.find((p) => p.id === pool)?.cards).toEqual(cards);
    for (const card of cards) {
      expect(poolsOfCard(card)).toEqual([pool]);
      expect(typeIdsOfCard(card)).toEqual([pool, card]);
      expect(cardMatches(pool, card)).toBe(true);
      expect(cardMatches(ANY_GPU, card)).toBe(true);
      expect(checkGpuId(card)).toEqual({ known: true });
    }
    for (const other of KNOWN_CARDS.filter((c) => !cards.includes(c))) expect(cardMatches(pool, other)).toBe(false);
    expect(checkGpuId(pool)).toEqual({ known: true });
  });

  it("a card outside every pool is its own type; an unknown card is only ANY", () => {
    expect(poolsOfCard("NVIDIA A30")).toEqual([]);
    expect(typeIdsOfCard("NVIDIA A30")).toEqual(["NVIDIA A30"]);
    expect(checkGpuId("NVIDIA A30")).toEqual({ known: true });
    expect(cardMatches("NVIDIA A30", "NVIDIA A30")).toBe(true);
    expect(cardMatches("NVIDIA H200", "NVIDIA H200 NVL")).toBe(false);
    expect(cardMatches(ANY_GPU, "Some Future GPU")).toBe(true);
    expect(typeIdsOfCard("Some Future GPU")).toEqual(["Some Future GPU"]);
  });
});

describe("written GPU ids", () => {
  it("ANY, pools and exact card names are known; ids are case-sensitive", () => {
    expect(checkGpuId("ANY")).toEqual({ known: true });
    expect(checkGpuId("HOPPER_141")).toEqual({ known: true });
    expect(checkGpuId("NVIDIA H200")).toEqual({ known: true });
    expect(checkGpuId("hopper_141")).toEqual({ known: false, nearest: ["HOPPER_141"] });
    expect(checkGpuId("any")).toEqual({ known: false, nearest: ["ANY"] });
  });

  it("a typo proposes the nearest ids by edit distance", () => {
    expect(nearestGpuIds("HOPER_141")).toEqual(["HOPPER_141"]);
    expect(nearestGpuIds("ADA_42")[0]).toBe("ADA_24");
    expect(nearestGpuIds("AMPERE_81")).toEqual(["AMPERE_80", "AMPERE_16", "AMPERE_24"]);
    // Spelled the same but for case or punctuation: just that one.
    expect(nearestGpuIds("ampere-80")).toEqual(["AMPERE_80"]);
  });

  it("a fragment of card names proposes their pools first, then the cards", () => {
    expect(nearestGpuIds("H100")).toEqual(["ADA_80_PRO", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3"]);
    expect(nearestGpuIds("H100_80")).toEqual(["ADA_80_PRO", "NVIDIA H100 80GB HBM3"]);
    expect(nearestGpuIds("B200")).toEqual(["BLACKWELL_180", "NVIDIA B200"]);
    expect(nearestGpuIds("4090")).toEqual(["ADA_24", "NVIDIA GeForce RTX 4090"]);
  });

  it("nothing near: no proposal, but the message still says what to write", () => {
    expect(nearestGpuIds("TPU-v5")).toEqual([]);
    const message = unknownGpuIdMessage("TPU-v5")!;
    expect(message).toMatch(
      /^unknown GPU type "TPU-v5": write a pool id \(AMPERE_16, .*HOPPER_141.*\), an exact card name as nvidia-smi prints it \(e\.g\. "NVIDIA H200"\), or "ANY"/,
    );
    expect(unknownGpuIdMessage("HOPER_141")).toMatch(/^unknown GPU type "HOPER_141": did you mean "HOPPER_141"\? /);
    expect(unknownGpuIdMessage("HOPPER_141")).toBeUndefined();
  });

  it("the host's own card names are accepted when given", () => {
    expect(checkGpuId("NVIDIA H200 NVL").known).toBe(false);
    expect(checkGpuId("NVIDIA H200 NVL", ["NVIDIA H200 NVL"])).toEqual({ known: true });
  });

  it("gpuTypeIdProblems names each unknown id of a REST list by its position", () => {
    expect(gpuTypeIdProblems(["HOPPER_141", "H100_80", "ANY", "B200"])).toEqual([
      expect.stringMatching(/^\$\.gpuTypeIds\[1\]: unknown GPU type "H100_80": did you mean "ADA_80_PRO", "NVIDIA H100 80GB HBM3"\?/),
      expect.stringMatching(/^\$\.gpuTypeIds\[3\]: unknown GPU type "B200": did you mean "BLACKWELL_180", "NVIDIA B200"\?/),
    ]);
    expect(gpuTypeIdProblems(["ADA_24"])).toEqual([]);
    expect(gpuTypeIdProblems("ADA_24")).toEqual([]);
  });
});
