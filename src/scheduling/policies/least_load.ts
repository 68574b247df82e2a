import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision } from "./rank.ts";

/** Fewest waiting prefill tokens wins; ties go to a random draw. Blind to the cache. */
export function leastLoad(): Policy {
  return {
    name: "least_load",
    select(_request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      return buildDecision("least_load", candidates, (candidate) => {
        const draw = context.random();
        return {
          terms: { waitingPrefillTokens: candidate.waitingPrefillTokens },
          tieBreaks: [draw],
          detail: { tieBreakDraw: draw },
        };
      });
    },
  };
}

export const leastLoadPolicy = policyFactory({
  name: "least_load",
  summary: "the fewest waiting prefill tokens, blind to the cache",
  params: z.strictObject({}),
  create: () => leastLoad(),
});
