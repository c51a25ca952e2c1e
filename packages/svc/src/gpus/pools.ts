// The GPU type ids users write (`gpu: "HOPPER_141"`, REST `gpuTypeIds`): the provider's pool ids, each a set of
// cards; the exact card names `nvidia-smi` prints; and ANY. Which cards each pool holds, which pools a card is
// in, and whether a written id is known (with the nearest known ids when it is not). Pure data and functions.
//
// Sources (docs/gpus.md cites them): the pools and their cards are RunPod's, as its own SDK defines them
// (runpod/flash, src/runpod_flash/core/resources/gpu.py: GpuGroup and POOLS_TO_TYPES) and its docs list them
// (docs.runpod.io/flash/configuration/gpu-types, /serverless/pricing); the card names are RunPod's GPU ids
// (docs.runpod.io/references/gpu-types), which are what nvidia-smi prints as the GPU's name.

/** Any GPU: the id that every card satisfies. */
export const ANY_GPU = "ANY";

export interface GpuPool {
  /** The id users write, e.g. "HOPPER_141". */
  id: string;
  /** Exact card names (as nvidia-smi prints them) in this pool. */
  cards: readonly string[];
  /** Memory per card, as the provider labels the pool (GB). */
  memoryGb: number;
}

export const GPU_POOLS: readonly GpuPool[] = [
  { id: "AMPERE_16", memoryGb: 16, cards: ["NVIDIA RTX A4000", "NVIDIA RTX A4500", "NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 2000 Ada Generation"] },
  { id: "AMPERE_24", memoryGb: 24, cards: ["NVIDIA RTX A5000", "NVIDIA L4", "NVIDIA GeForce RTX 3090"] },
  { id: "ADA_24", memoryGb: 24, cards: ["NVIDIA GeForce RTX 4090"] },
  { id: "ADA_32_PRO", memoryGb: 32, cards: ["NVIDIA GeForce RTX 5090"] },
  { id: "AMPERE_48", memoryGb: 48, cards: ["NVIDIA A40", "NVIDIA RTX A6000"] },
  { id: "ADA_48_PRO", memoryGb: 48, cards: ["NVIDIA RTX 6000 Ada Generation", "NVIDIA L40", "NVIDIA L40S"] },
  { id: "AMPERE_80", memoryGb: 80, cards: ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"] },
  { id: "ADA_80_PRO", memoryGb: 80, cards: ["NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL"] },
  {
    id: "BLACKWELL_96",
    memoryGb: 96,
    cards: [
      "NVIDIA RTX PRO 6000 Blackwell Server Edition",
      "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
      "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ],
  },
  { id: "HOPPER_141", memoryGb: 141, cards: ["NVIDIA H200"] },
  { id: "BLACKWELL_180", memoryGb: 180, cards: ["NVIDIA B200"] },
];

/** Cards the provider offers outside any pool: still ids a user may write (exactly as nvidia-smi names them). */
const CARDS_OUTSIDE_POOLS: readonly string[] = [
  "NVIDIA A30",
  "NVIDIA GeForce RTX 3070",
  "NVIDIA GeForce RTX 3080",
  "NVIDIA GeForce RTX 3080 Ti",
  "NVIDIA GeForce RTX 3090 Ti",
  "NVIDIA GeForce RTX 4070 Ti",
  "NVIDIA GeForce RTX 4080",
  "NVIDIA GeForce RTX 4080 SUPER",
  "NVIDIA GeForce RTX 5080",
  "NVIDIA RTX 4000 SFF Ada Generation",
  "NVIDIA RTX 5000 Ada Generation",
  "NVIDIA RTX A2000",
  "Tesla V100-FHHL-16GB",
  "Tesla V100-PCIE-16GB",
  "Tesla V100-SXM2-16GB",
  "Tesla V100-SXM2-32GB",
];

/** Every card name svc knows, pooled or not. */
export const KNOWN_CARDS: readonly string[] = [...GPU_POOLS.flatMap((p) => p.cards), ...CARDS_OUTSIDE_POOLS];

/** Every id a user may write: the pool ids, the card names, and ANY. */
export function knownGpuIds(): string[] {
  return [...GPU_POOLS.map((p) => p.id), ...KNOWN_CARDS, ANY_GPU];
}

export function poolById(id: string): GpuPool | undefined {
  return GPU_POOLS.find((p) => p.id === id);
}

/** The pool ids a card (its exact nvidia-smi name) belongs to; none for a card outside every pool. */
export function poolsOfCard(cardName: string): string[] {
  return GPU_POOLS.filter((p) => p.cards.includes(cardName)).map((p) => p.id);
}

/** The ids a card satisfies besides ANY: its pools, then its own name. The type ids a host's GPU offers. */
export function typeIdsOfCard(cardName: string): string[] {
  return [...poolsOfCard(cardName), cardName];
}

/** Whether a card satisfies a written id: ANY, a pool holding it, or its exact name. */
export function cardMatches(typeId: string, cardName: string): boolean {
  return typeId === ANY_GPU || typeId === cardName || (poolById(typeId)?.cards.includes(cardName) ?? false);
}

export type GpuIdCheck = { known: true } | { known: false; nearest: string[] };

/**
 * Whether `id` is a GPU type id svc knows. `alsoKnown`: more card names to accept (the host's own GPUs, which may
 * be cards no list names). When unknown, the nearest known ids.
 */
export function checkGpuId(id: string, alsoKnown: readonly string[] = []): GpuIdCheck {
  const known = [...knownGpuIds(), ...alsoKnown];
  if (known.includes(id)) return { known: true };
  return { known: false, nearest: nearestGpuIds(id, known) };
}

/** Lowercase letters and digits only: "NVIDIA H100 80GB HBM3" and "h100_80" compare by what they spell. */
function spelled(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]/g, "");
}

export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The known ids nearest to an unknown one, best first (at most `limit`). A fragment of card names ("H100",
 * "A100", "B200") proposes the pools holding those cards, then the cards; otherwise the ids within a small edit
 * distance of what was written (letters and digits only, case ignored), so "HOPER_141" finds HOPPER_141.
 */
export function nearestGpuIds(id: string, known: readonly string[] = knownGpuIds(), limit = 3): string[] {
  const written = spelled(id);
  if (written.length === 0) return [];
  if (written.length >= 3) {
    const cards = known.filter((k) => !poolById(k) && k !== ANY_GPU && spelled(k).includes(written));
    if (cards.length > 0) {
      const pools = GPU_POOLS.filter((p) => p.cards.some((c) => cards.includes(c))).map((p) => p.id);
      return [...new Set([...pools, ...cards])].slice(0, limit);
    }
  }
  const scored = known.map((k) => ({ id: k, distance: editDistance(written, spelled(k)) }));
  // Spelled the same but for case or punctuation ("hopper-141"): that one, nothing else.
  const same = scored.filter((s) => s.distance === 0);
  if (same.length > 0) return same.map((s) => s.id).slice(0, limit);
  const within = Math.max(2, Math.floor(written.length / 3));
  return scored
    .filter((s) => s.distance <= within)
    .sort((a, b) => a.distance - b.distance || known.indexOf(a.id) - known.indexOf(b.id))
    .slice(0, limit)
    .map((s) => s.id);
}

/**
 * The problem with one written id, or undefined when it is known: `unknown GPU type "X"` with the nearest ids,
 * worded for the build and the REST API alike (each prefixes where it was written).
 */
export function unknownGpuIdMessage(id: string, alsoKnown: readonly string[] = []): string | undefined {
  const check = checkGpuId(id, alsoKnown);
  if (check.known) return undefined;
  const nearest = check.nearest.length > 0 ? `did you mean ${check.nearest.map((n) => JSON.stringify(n)).join(", ")}? ` : "";
  return `unknown GPU type ${JSON.stringify(id)}: ${nearest}write a pool id (${GPU_POOLS.map((p) => p.id).join(", ")}), an exact card name as nvidia-smi prints it (e.g. "NVIDIA H200"), or "ANY" (docs/gpus.md)`;
}

/**
 * `$.gpuTypeIds[i]: unknown GPU type ...` for each unknown id of a REST body's list (nothing for a value that is
 * not a list of strings: the schema reports that). For the endpoint create and update handlers.
 */
export function gpuTypeIdProblems(ids: unknown, path = "$.gpuTypeIds", alsoKnown: readonly string[] = []): string[] {
  if (!Array.isArray(ids)) return [];
  return ids.flatMap((id, i) => {
    const message = typeof id === "string" ? unknownGpuIdMessage(id, alsoKnown) : undefined;
    return message ? [`${path}[${i}]: ${message}`] : [];
  });
}
