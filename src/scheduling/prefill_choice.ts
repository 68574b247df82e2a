/**
 * The prefill side of one dispatch decision, the step the router (src/gateway/dispatch_plan.ts)
 * and both simulator replays (src/sim/simulator.ts, src/sim/pd_simulator.ts) share, so what wins
 * in the simulator is what ships: the policy ranks the candidates, and the first choice's TTFT is
 * predicted with or without a copy from the store's pool.
 */
import { estimateTtft, type TtftModelParams } from "./ttft_estimate.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "./types.ts";

/**
 * Whether the chosen engine loads the pool's part of the prefix: `never` (the router: an engine
 * reads only what it holds), `planned` (when the policy planned a transfer) or `always`.
 */
export type PoolUse = "never" | "planned" | "always";

export interface PrefillChoice {
  decision: Decision;
  /** The first choice, undefined when the policy ranked nobody. */
  chosen?: Candidate;
  /** The chosen engine copies the pool's part of the prefix. */
  usePool: boolean;
  /** Prompt tokens the first choice reuses (not computed: not leased as prefill work). */
  reusedTokens: number;
  /** The policy's own TTFT prediction, else the TTFT model's for the first choice. */
  predictedTtftS?: number;
}

export function choosePrefill(
  request: ScheduleRequest,
  candidates: readonly Candidate[],
  policy: Policy,
  context: ScheduleContext,
  options: { ttft: TtftModelParams; poolUse: PoolUse },
): PrefillChoice {
  const seen = { ...request, poolLoads: options.poolUse !== "never" };
  const decision = policy.select(seen, candidates as Candidate[], context);
  const chosen = candidates.find((c) => c.id === decision.ranking[0]);
  if (!chosen) return { decision, usePool: false, reusedTokens: 0 };
  const plannedTransfer = decision.scores.find((s) => s.id === chosen.id)?.transferTokens ?? 0;
  const usePool = options.poolUse === "always" ||
    (options.poolUse === "planned" && plannedTransfer > 0);
  const estimate = estimateTtft(request, chosen, options.ttft, { allowTransfer: usePool });
  return {
    decision,
    chosen,
    usePool,
    reusedTokens: estimate.reusedTokens,
    predictedTtftS: decision.predictedTtftS ?? estimate.totalS,
  };
}
