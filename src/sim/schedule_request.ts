/**
 * What a policy is told of a trace request in both simulators, as the router tells it
 * (src/gateway/dispatch_plan.ts): the prompt, the pool's prefix (none with the pool off) and the
 * key of its first unheld block (src/scheduling/prefix_home.ts).
 */
import type { PrefixHits } from "../kv/types.ts";
import { withHomeKey } from "../scheduling/prefix_home.ts";
import type { Candidate, ScheduleRequest } from "../scheduling/types.ts";
import type { TraceRequest } from "./trace.ts";

export function simScheduleRequest(
  request: TraceRequest,
  hits: PrefixHits,
  candidates: readonly Candidate[],
  options: { blockTokens: number; poolOff: boolean },
): ScheduleRequest {
  const prompt = request.inputLength;
  const pool = Math.min(hits.poolChunks * options.blockTokens, prompt);
  return withHomeKey(
    { promptTokens: prompt, poolPrefixTokens: options.poolOff ? 0 : pool },
    candidates,
    (index) => request.hashIds[index],
    options.blockTokens,
  );
}
