/**
 * Named signals the policies score candidates by, so that a policy reads as the composition it is
 * (llm-d style: a prefix scorer, a queue scorer, a KV-utilisation scorer, weighted) instead of
 * repeating the same arithmetic under another name. Each takes the request's prompt size or the
 * candidates it is normalised over, and a candidate.
 */
import type { Candidate } from "./types.ts";

/** A waiting request taken to be this many tokens when only tokens are known (8k prompts). */
export const TOKENS_PER_QUEUED_REQUEST = 8192;

/** Prompt tokens the candidate holds locally, capped at the prompt. */
export function prefixHitTokens(promptTokens: number, candidate: Candidate): number {
  return Math.min(promptTokens, Math.max(0, candidate.localPrefixTokens));
}

/** Prompt tokens the candidate would have to compute. */
export function prefixMissTokens(promptTokens: number, candidate: Candidate): number {
  return promptTokens - prefixHitTokens(promptTokens, candidate);
}

/** The share of the prompt the candidate holds, 0 for an empty prompt. */
export function prefixMatchRate(promptTokens: number, candidate: Candidate): number {
  return promptTokens === 0 ? 0 : prefixHitTokens(promptTokens, candidate) / promptTokens;
}

/** Requests waiting for their first token on the candidate (from tokens when only those are known). */
export function waitingRequests(candidate: Candidate): number {
  return candidate.waitingPrefillRequests ??
    Math.ceil(Math.max(0, candidate.waitingPrefillTokens) / TOKENS_PER_QUEUED_REQUEST);
}

/** Requests the candidate carries: waiting and running. */
export function requestLoad(candidate: Candidate): number {
  return waitingRequests(candidate) + Math.max(0, candidate.runningRequests);
}

/** KV tokens the candidate holds: its queued prefill plus `perRunning` per running request. */
export function kvTokens(candidate: Candidate, perRunning: number): number {
  return Math.max(0, candidate.waitingPrefillTokens) +
    Math.max(0, candidate.runningRequests) * perRunning;
}

/** The share of `capacity` the candidate's KV takes, at most 1. */
export function kvUsage(candidate: Candidate, perRunning: number, capacity: number): number {
  return Math.min(1, kvTokens(candidate, perRunning) / capacity);
}

/**
 * Min-max normalisation of a signal over the candidates, higher for less (llm-d's queue scorer):
 * 1 for the least, 0 for the most, 1 for everyone when all are equal.
 */
export function lessIsBetter(
  candidates: readonly Candidate[],
  signal: (candidate: Candidate) => number,
): (candidate: Candidate) => number {
  const values = candidates.map(signal);
  const min = Math.min(...values), max = Math.max(...values);
  return (candidate) => (max === min ? 1 : (max - signal(candidate)) / (max - min));
}
