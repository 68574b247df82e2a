import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import { estimateTtft, type TtftModelParams } from "../ttft_estimate.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision } from "./rank.ts";

/**
 * Mooncake FAST'25 Algorithm 1: per candidate, predicted TTFT = T_queue (its queued prefill
 * through the prefill-time model) + T_transfer (pool prefix beyond the local one, when the
 * balancing threshold says to load it) + T_prefill (what is left). The minimum wins; a random
 * draw breaks exact ties. `predictedTtftS` is the winner's sum, for admission.
 */
export function mooncakeTtft(params: TtftModelParams): Policy {
  return {
    name: "mooncake_ttft",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      return buildDecision("mooncake_ttft", candidates, (candidate) => {
        const estimate = estimateTtft(request, candidate, params);
        const draw = context.random();
        return {
          terms: {
            queueS: estimate.queueS,
            transferS: estimate.transferS,
            prefillS: estimate.prefillS,
          },
          tieBreaks: [draw],
          transferTokens: estimate.transferTokens,
          detail: {
            localPrefixTokens: estimate.reusedTokens - estimate.transferTokens,
            transferTokens: estimate.transferTokens,
            newTokens: estimate.newTokens,
            tieBreakDraw: draw,
          },
        };
      }, true);
    },
  };
}

export const mooncakeTtftPolicy = policyFactory({
  name: "mooncake_ttft",
  summary: "Mooncake Algorithm 1: the lowest predicted TTFT (queue + transfer + prefill)",
  // Its parameters are the TTFT model's, which every policy takes (registry.ts).
  params: z.strictObject({}),
  create: (_params, ttft) => mooncakeTtft(ttft),
});
