import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { loadFilterTerm } from "./load_filter.ts";
import { buildDecision } from "./rank.ts";
import { prefixMissTokens } from "../scorers.ts";

export interface CacheAwareOptions {
  /** Llumnix load filter: waiting prefill tokens at or above this are demoted (off when unset). */
  loadFilterTokens?: number;
}

/**
 * Llumnix's chain (docs/compat.md §5): lowest `prefixMissTokens + waitingPrefillTokens`, then lowest
 * `waitingPrefillTokens`, then a random draw. The miss counts from token 0, so an instance
 * without a hit misses the whole prompt (Llumnix scores it 0: a bug not copied).
 */
export function cacheAware(options: CacheAwareOptions = {}): Policy {
  return {
    name: "cache_aware",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const miss = (c: Candidate) => prefixMissTokens(prompt, c);
      const demote = loadFilterTerm(
        candidates,
        options.loadFilterTokens,
        (c) => miss(c) + c.waitingPrefillTokens,
      );
      return buildDecision("cache_aware", candidates, (candidate) => {
        const draw = context.random();
        const terms: Record<string, number> = {
          prefixMissTokens: miss(candidate),
          waitingPrefillTokens: candidate.waitingPrefillTokens,
        };
        if (demote) terms.overLoadThreshold = demote(candidate);
        return {
          terms,
          tieBreaks: [candidate.waitingPrefillTokens, draw],
          detail: { tieBreakDraw: draw },
        };
      });
    },
  };
}

export const cacheAwarePolicy = policyFactory({
  name: "cache_aware",
  summary: "Llumnix: the fewest tokens to compute plus waiting prefill tokens",
  params: z.strictObject({
    /** Llumnix's prefill-load filter in tokens (off when unset). */
    loadFilterTokens: z.number().positive().optional(),
  }),
  create: (params) => cacheAware(params),
});
