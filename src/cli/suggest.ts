// "Did you mean": the known name closest to a mistyped one, for names the CLI looks up (endpoints, volumes,
// environments). Pure.

/**
 * The edit distance between two strings: the fewest single-character inserts, deletes, substitutions or swaps of
 * two neighbours ("fsn" for "fns" is one typo, not two), as commander counts for unknown options.
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `typed`, when it is close enough to be a typo: at most a third of the longer name's
 * characters differ (at least one), as commander judges unknown options. Ties go to the first candidate.
 */
export function closestName(typed: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    if (name === typed) continue;
    const distance = editDistance(typed.toLowerCase(), name.toLowerCase());
    const allowed = Math.max(1, Math.floor(Math.max(typed.length, name.length) / 3));
    if (distance <= allowed && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** `; did you mean "x"?` when a candidate is close, else "". For the end of a message. */
export function didYouMean(typed: string, candidates: readonly string[]): string {
  const name = closestName(typed, candidates);
  return name === undefined ? "" : `; did you mean "${name}"?`;
}
