import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, healthyOf } from "./rank.ts";
import { prefixMatchRate, requestLoad } from "../scorers.ts";

export interface SglangCacheAwareOptions {
  /** `cache_threshold`: prefix match rate above which the best match wins (default 0.3). */
  cacheThreshold?: number;
  /** `balance_abs_threshold`: load spread (requests) for imbalance (default 64). */
  balanceAbsThreshold?: number;
  /** `balance_rel_threshold`: max load over min load for imbalance (default 1.5). */
  balanceRelThreshold?: number;
}

/**
 * SGLang's router `cache_aware` policy (sgl-project/sglang, `sgl-router/src/policies/
 * cache_aware.rs`; defaults of `sglang_router` `RouterArgs`: cache_threshold 0.3,
 * balance_abs_threshold 64, balance_rel_threshold 1.5):
 *
 * 1. Imbalanced (max load − min load > abs AND max load > rel × min load): shortest queue, the
 *    fewest requests in flight.
 * 2. Else, with the best prefix match rate (matched / prompt) above `cache_threshold`: the worker
 *    with that match.
 * 3. Else: the worker whose approximate radix tree is smallest (the most free cache).
 *
 * Signals derived from the Candidate (SGLang keeps its own approximate radix tree of the text it
 * routed, and counts its requests in flight): the match is `localPrefixTokens` (the engines' real
 * caches, not an approximation of them); the load is `waitingPrefillRequests + runningRequests`
 * (when the first is absent, `waitingPrefillTokens` in 8k-token requests); the tree size, which
 * the Candidate lacks, is stood in for by `waitingPrefillTokens`: the text routed there and not
 * yet computed. The others follow each mode's key (the proxy's retry list); ties go to lower load,
 * then a draw from `context.random`.
 */
export function sglangCacheAware(options: SglangCacheAwareOptions = {}): Policy {
  const cacheThreshold = options.cacheThreshold ?? 0.3;
  const absThreshold = options.balanceAbsThreshold ?? 64;
  const relThreshold = options.balanceRelThreshold ?? 1.5;
  return {
    name: "sglang_cache_aware",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const load = requestLoad;
      const rate = (c: Candidate) => prefixMatchRate(prompt, c);
      const healthy = healthyOf(candidates);
      const loads = healthy.map(load);
      const maxLoad = Math.max(0, ...loads), minLoad = Math.min(...loads);
      const imbalanced = maxLoad - minLoad > absThreshold && maxLoad > minLoad * relThreshold;
      const bestRate = Math.max(0, ...healthy.map(rate));
      const mode = imbalanced ? 0 : bestRate > cacheThreshold ? 1 : 2;
      return buildDecision("sglang_cache_aware", candidates, (candidate) => {
        const draw = context.random();
        const terms: Record<string, number> = mode === 0
          ? { loadRequests: load(candidate) }
          : mode === 1
          ? { negativeMatchRate: -rate(candidate) }
          : { treeSizeProxyTokens: Math.max(0, candidate.waitingPrefillTokens) };
        return {
          terms,
          tieBreaks: [load(candidate), draw],
          detail: {
            imbalanced: imbalanced ? 1 : 0,
            matchRate: rate(candidate),
            loadRequests: load(candidate),
            tieBreakDraw: draw,
          },
        };
      });
    },
  };
}

export const sglangCacheAwarePolicy = policyFactory({
  name: "sglang_cache_aware",
  summary: "SGLang router's cache_aware: balance past an imbalance, else the best prefix match",
  params: z.strictObject({
    cacheThreshold: z.number().min(0).max(1).optional(),
    balanceAbsThreshold: z.number().min(0).optional(),
    balanceRelThreshold: z.number().min(0).optional(),
  }),
  create: (params) => sglangCacheAware(params),
});
