/** "did you mean …?" for a misspelt name: the closest known name by edit distance. */

/** Levenshtein distance: insertions, deletions and substitutions, each costing 1. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j] + 1, current[j - 1] + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length];
}

/**
 * The known name closest to `word`, when close enough to be a typo: at most a third of its
 * letters wrong (at least 1, at most 3), compared case-insensitively.
 */
export function closestName(word: string, known: readonly string[]): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const name of known) {
    const distance = editDistance(word.toLowerCase(), name.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [name, distance];
  }
  return bestDistance <= limit ? best : undefined;
}

/** ` (did you mean "x"?)`, or "" when no known name is close. */
export function didYouMean(word: string, known: readonly string[]): string {
  const name = closestName(word, known);
  return name === undefined ? "" : ` (did you mean "${name}"?)`;
}
