/**
 * Decode-side selection for prefill/decode disaggregation (Mooncake's Conductor picks the decode
 * instance by load so that the time between tokens stays inside its SLO). Pure: candidates and a
 * decode-time model in, a ranking with every candidate's terms out.
 */
import { type DecodeModel, decodeStepS } from "./decode_model.ts";

export const DECODE_POLICY_NAMES = ["least_running", "kv_headroom"] as const;
export type DecodePolicyName = typeof DECODE_POLICY_NAMES[number];

/** What the decode policy sees of one decode instance. */
export interface DecodeCandidate {
  id: string;
  healthy: boolean;
  /** Requests decoding there now (the engine's report reconciled with the router's own leases). */
  runningRequests: number;
  /** Fraction of its KV cache in use (0..1), when the engine reports it. */
  kvUsage?: number;
  /** Mean KV tokens of a request running there, when the engine reports its cache's size. */
  kvTokensPerRequest?: number;
  /** Prompt tokens it already holds (less to transfer, or to prefill itself); breaks ties. */
  prefixTokens?: number;
}

export interface DecodeScore {
  id: string;
  /** Lower is better. */
  score: number;
  terms: { runningRequests: number; predictedTbtS: number; kvUsage: number };
  /** Why it cannot be chosen (unhealthy, KV cache full). */
  excluded?: string;
}

export interface DecodeDecision {
  /** Choosable candidates, best first. */
  ranking: string[];
  scores: DecodeScore[];
  /** Predicted TBT on the best candidate once this request joins its batch. */
  predictedTbtS?: number;
}

export interface DecodePolicyOptions {
  model: DecodeModel;
  policy?: DecodePolicyName;
  /** A candidate whose KV cache is at least this full takes nothing new (default 0.98). */
  maxKvUsage?: number;
}

/**
 * `least_running` (default): the fewest running requests, i.e. the lowest predicted TBT, ties
 * broken by KV headroom. `kv_headroom`: the most free KV cache, ties broken by running requests.
 * Remaining ties go to the instance holding more of the prompt.
 */
export function selectDecode(
  candidates: readonly DecodeCandidate[],
  options: DecodePolicyOptions,
): DecodeDecision {
  const maxKvUsage = options.maxKvUsage ?? 0.98;
  const prefix = new Map(candidates.map((c) => [c.id, c.prefixTokens ?? 0]));
  const byKv = options.policy === "kv_headroom";
  const scores = candidates.map((c): DecodeScore => {
    const kvUsage = c.kvUsage ?? 0;
    const predictedTbtS = decodeStepS(options.model, c.runningRequests + 1);
    const excluded = !c.healthy
      ? "unhealthy"
      : kvUsage >= maxKvUsage
      ? `KV cache ${Math.round(kvUsage * 100)}% full`
      : undefined;
    return {
      id: c.id,
      score: byKv ? kvUsage : predictedTbtS,
      terms: { runningRequests: c.runningRequests, predictedTbtS, kvUsage },
      excluded,
    };
  });
  const ranked = scores.filter((s) => !s.excluded).sort((a, b) =>
    a.score - b.score ||
    (byKv
      ? a.terms.runningRequests - b.terms.runningRequests
      : a.terms.kvUsage - b.terms.kvUsage) ||
    (prefix.get(b.id) ?? 0) - (prefix.get(a.id) ?? 0) ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
  return {
    ranking: ranked.map((s) => s.id),
    scores,
    predictedTbtS: ranked[0]?.terms.predictedTbtS,
  };
}
