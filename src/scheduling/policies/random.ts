import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision } from "./rank.ts";

/** A uniformly random order of the healthy candidates (one draw each, from the context). */
export function randomPolicy(): Policy {
  return {
    name: "random",
    select(_request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      return buildDecision("random", candidates, () => ({ terms: { draw: context.random() } }));
    },
  };
}

export const randomPolicyFactory = policyFactory({
  name: "random",
  summary: "a uniformly random instance",
  params: z.strictObject({}),
  create: () => randomPolicy(),
});
