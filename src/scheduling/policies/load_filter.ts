import type { Candidate } from "../types.ts";
import { demotionPenalty, healthyOf } from "./rank.ts";

/**
 * Llumnix's prefill-load filter (docs/compat.md §5): healthy instances whose waiting prefill tokens are
 * at or above the threshold are set aside unless that would leave none. Returns their
 * `overLoadThreshold` term (a penalty that moves them behind every other candidate, given each
 * candidate's score without it), or undefined when the filter is off or sets nothing aside: then
 * the policy adds no such term, and nothing is computed for it on the request path.
 */
export function loadFilterTerm(
  candidates: readonly Candidate[],
  thresholdTokens: number | undefined,
  baseScore: (candidate: Candidate) => number,
): ((candidate: Candidate) => number) | undefined {
  if (thresholdTokens === undefined) return undefined;
  const healthy = healthyOf(candidates);
  const over = healthy.filter((candidate) => candidate.waitingPrefillTokens >= thresholdTokens);
  if (over.length === 0 || over.length === healthy.length) return undefined;
  const setAside = new Set(over.map((candidate) => candidate.id));
  const penalty = demotionPenalty(healthy.map(baseScore));
  return (candidate) => (setAside.has(candidate.id) ? penalty : 0);
}
