import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, healthyOf } from "./rank.ts";

/** Healthy candidates in turn: the context's per-model sequence picks the starting one. */
export function roundRobin(): Policy {
  return {
    name: "round_robin",
    select(_request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const n = healthyOf(candidates).length;
      const start = n === 0 ? 0 : ((Math.floor(context.sequence) % n) + n) % n;
      return buildDecision("round_robin", candidates, (_candidate, i) => ({
        terms: { position: (i - start + n) % n },
      }));
    },
  };
}

export const roundRobinPolicy = policyFactory({
  name: "round_robin",
  summary: "healthy instances in turn",
  params: z.strictObject({}),
  create: () => roundRobin(),
});
