import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { loadFilterTerm } from "./load_filter.ts";
import { buildDecision } from "./rank.ts";
import { prefixHitTokens } from "../scorers.ts";

export interface KvHitLenOptions {
  /** Llumnix load filter: waiting prefill tokens at or above this are demoted (off when unset). */
  loadFilterTokens?: number;
}

/**
 * Llumnix's `kv_cache_hit_len`: the longest local prefix wins (scored as its negative, so lower
 * is better like every policy); fewer waiting prefill tokens, then a random draw, break ties.
 */
export function kvHitLen(options: KvHitLenOptions = {}): Policy {
  return {
    name: "kv_hit_len",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const hit = (c: Candidate) => prefixHitTokens(prompt, c);
      const demote = loadFilterTerm(candidates, options.loadFilterTokens, (c) => -hit(c));
      return buildDecision("kv_hit_len", candidates, (candidate) => {
        const draw = context.random();
        const terms: Record<string, number> = { negativeLocalPrefixTokens: -hit(candidate) };
        if (demote) terms.overLoadThreshold = demote(candidate);
        return {
          terms,
          tieBreaks: [candidate.waitingPrefillTokens, draw],
          detail: { localPrefixTokens: hit(candidate), tieBreakDraw: draw },
        };
      });
    },
  };
}

export const kvHitLenPolicy = policyFactory({
  name: "kv_hit_len",
  summary: "Llumnix: the longest local prefix",
  params: z.strictObject({
    /** Llumnix's prefill-load filter in tokens (off when unset). */
    loadFilterTokens: z.number().positive().optional(),
  }),
  create: (params) => kvHitLen(params),
});
