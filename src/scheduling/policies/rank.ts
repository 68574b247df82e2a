import type { Candidate, CandidateScore, Decision } from "../types.ts";

/** One healthy candidate as a policy scored it. */
export interface Scored {
  /** Named parts of the score; the score is their sum. */
  terms: Record<string, number>;
  /** Compared in order when scores tie (lower first); the input index decides last. */
  tieBreaks?: number[];
  transferTokens?: number;
  detail?: Record<string, number>;
}

/** The candidates a policy may choose: healthy ones, in input order. */
export function healthyOf(candidates: readonly Candidate[]): Candidate[] {
  return candidates.filter((candidate) => candidate.healthy);
}

/** Sum of the terms in insertion order (the order tests add them in). */
function sumTerms(terms: Record<string, number>): number {
  let total = 0;
  for (const value of Object.values(terms)) total += value;
  return total;
}

/**
 * The shared tail of every policy: sums terms into scores, sorts healthy candidates by score
 * then tie-breaks, and lists every candidate (unhealthy ones excluded with a reason).
 */
export function buildDecision(
  policy: string,
  candidates: readonly Candidate[],
  score: (candidate: Candidate, healthyIndex: number) => Scored,
  predictTtft = false,
): Decision {
  const rows: { index: number; entry: CandidateScore; tieBreaks: number[] }[] = [];
  const scores: CandidateScore[] = [];
  let healthyIndex = 0;
  for (let index = 0; index < candidates.length; index++) {
    const candidate = candidates[index];
    if (!candidate.healthy) {
      scores.push({ id: candidate.id, terms: {}, score: 0, excluded: "unhealthy" });
      continue;
    }
    const scored = score(candidate, healthyIndex++);
    const entry: CandidateScore = {
      id: candidate.id,
      terms: scored.terms,
      score: sumTerms(scored.terms),
    };
    if (scored.transferTokens !== undefined) entry.transferTokens = scored.transferTokens;
    if (scored.detail !== undefined) entry.detail = scored.detail;
    scores.push(entry);
    rows.push({ index, entry, tieBreaks: scored.tieBreaks ?? [] });
  }
  rows.sort((a, b) => {
    if (a.entry.score !== b.entry.score) return a.entry.score - b.entry.score;
    const n = Math.max(a.tieBreaks.length, b.tieBreaks.length);
    for (let i = 0; i < n; i++) {
      const d = (a.tieBreaks[i] ?? 0) - (b.tieBreaks[i] ?? 0);
      if (d !== 0) return d;
    }
    return a.index - b.index;
  });
  const decision: Decision = { policy, ranking: rows.map((row) => row.entry.id), scores };
  if (predictTtft && rows.length > 0) decision.predictedTtftS = rows[0].entry.score;
  return decision;
}

/**
 * A term that moves demoted candidates (over a load filter, not sampled) behind every other
 * one while keeping `score` the plain sum of terms.
 */
export function demotionPenalty(baseScores: readonly number[]): number {
  if (baseScores.length === 0) return 1;
  return Math.max(...baseScores) - Math.min(...baseScores) + 1;
}
