/**
 * A prefill decision's inputs, as the router logs them (src/telemetry/decision_log.ts), and their
 * replay through the same step the router took (prefill_choice.ts): with the same policy, the
 * same candidates, the same sequence number and the same random draws, the ranking comes out the
 * same. The random source records its draws so that a decision can be replayed exactly.
 */
import { choosePrefill, type PoolUse, type PrefillChoice } from "./prefill_choice.ts";
import type { TtftModelParams } from "./ttft_estimate.ts";
import type { Candidate, Policy, ScheduleContext, ScheduleRequest } from "./types.ts";

/** Everything one prefill decision was made from. */
export interface DecisionInputs {
  request: ScheduleRequest;
  candidates: Candidate[];
  sequence: number;
  /** The uniform draws the policy took, in order. */
  draws: number[];
  /** Whether the engines load the pool's part of a prefix (`kv.poolLoads`); absent: never. */
  poolUse?: PoolUse;
}

/** A schedule context whose random source writes each draw into `draws`. */
export function recordingContext(
  random: () => number,
  sequence: number,
): { context: ScheduleContext; draws: number[] } {
  const draws: number[] = [];
  const context = {
    sequence,
    random: () => {
      const draw = random();
      draws.push(draw);
      return draw;
    },
  };
  return { context, draws };
}

/**
 * The decision `inputs` give under `policy`; throws when the policy asks for more random draws
 * than were recorded (it took another path than the logged one).
 */
export function replayDecision(
  inputs: DecisionInputs,
  policy: Policy,
  ttft: TtftModelParams,
): PrefillChoice {
  let next = 0;
  const random = () => {
    if (next >= inputs.draws.length) {
      throw new Error(`the replay asked for draw ${next + 1} of ${inputs.draws.length} recorded`);
    }
    return inputs.draws[next++];
  };
  return choosePrefill(inputs.request, inputs.candidates, policy, {
    random,
    sequence: inputs.sequence,
  }, { ttft, poolUse: inputs.poolUse ?? "never" });
}
