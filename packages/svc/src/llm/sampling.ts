// Seeded randomness and temperature / top_p sampling over a small set of weighted choices.

/** A fast seeded generator (mulberry32): numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = (Math.trunc(seed) ^ 0x9e3779b9) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SamplingOptions {
  /** 0 picks the heaviest choice (the first of equals); 1 samples by weight; above 1 flattens the weights. */
  temperature: number;
  /** Keep the heaviest choices whose probabilities add up to at least top_p (0 < top_p <= 1). */
  top_p: number;
}

/** Index of the choice picked from `weights` (counts or probabilities, all > 0). */
export function sampleIndex(weights: readonly number[], options: SamplingOptions, random: () => number): number {
  if (weights.length === 0) throw new RangeError("sampleIndex: nothing to choose from");
  if (weights.length === 1) return 0;
  if (options.temperature <= 0) {
    let best = 0;
    for (let i = 1; i < weights.length; i++) if (weights[i]! > weights[best]!) best = i;
    return best;
  }
  // Weights to the power 1/T: T < 1 sharpens, T > 1 flattens. Computed in log space to stay finite.
  const logs = weights.map((w) => Math.log(w) / options.temperature);
  const top = Math.max(...logs);
  const scaled = logs.map((l) => Math.exp(l - top));
  const total = scaled.reduce((a, b) => a + b, 0);
  const order = scaled.map((p, i) => ({ p: p / total, i })).sort((a, b) => b.p - a.p || a.i - b.i);
  const nucleus: typeof order = [];
  let mass = 0;
  for (const entry of order) {
    nucleus.push(entry);
    mass += entry.p;
    if (mass >= options.top_p - 1e-12) break;
  }
  let pick = random() * mass;
  for (const entry of nucleus) {
    pick -= entry.p;
    if (pick < 0) return entry.i;
  }
  return nucleus[nucleus.length - 1]!.i;
}
