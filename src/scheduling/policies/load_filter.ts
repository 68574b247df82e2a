import type { Candidate } from "../types.ts";

/**
 * Llumnix's prefill-load filter (compat.md §5): instances whose waiting prefill tokens are at or
 * above the threshold are set aside unless that would leave none. Returns the ids set aside.
 */
export function overLoadThreshold(
  healthy: readonly Candidate[],
  thresholdTokens: number | undefined,
): Set<string> {
  if (thresholdTokens === undefined) return new Set();
  const over = healthy.filter((candidate) => candidate.waitingPrefillTokens >= thresholdTokens);
  return over.length === healthy.length ? new Set() : new Set(over.map((c) => c.id));
}
