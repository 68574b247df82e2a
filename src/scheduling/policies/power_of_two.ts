import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, demotionPenalty, healthyOf } from "./rank.ts";

/**
 * Power of two choices: two distinct healthy candidates drawn at random, the one with fewer
 * waiting prefill tokens wins (fewer running requests, then a draw, on ties). The others follow
 * by load, behind an `unsampled` term, so the proxy still has a retry list.
 */
export function powerOfTwo(): Policy {
  return {
    name: "power_of_two",
    select(_request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const healthy = healthyOf(candidates);
      const n = healthy.length;
      const first = Math.min(n - 1, Math.floor(context.random() * n));
      let second = Math.min(n - 2, Math.floor(context.random() * (n - 1)));
      if (second >= first) second++;
      const penalty = demotionPenalty(healthy.map((c) => c.waitingPrefillTokens));
      return buildDecision("power_of_two", candidates, (candidate, i) => {
        const sampled = i === first || i === second;
        const draw = context.random();
        return {
          terms: {
            waitingPrefillTokens: candidate.waitingPrefillTokens,
            unsampled: sampled ? 0 : penalty,
          },
          tieBreaks: [candidate.runningRequests, draw],
          detail: { sampled: sampled ? 1 : 0, tieBreakDraw: draw },
        };
      });
    },
  };
}

export const powerOfTwoPolicy = policyFactory({
  name: "power_of_two",
  summary: "the less loaded of two instances drawn at random",
  params: z.strictObject({}),
  create: () => powerOfTwo(),
});
