/**
 * Late binding: while every instance already has more prefill waiting than a bound, a request is
 * held by the router instead of joining an engine's queue, and is placed once an instance has room,
 * against the cluster as it is then (the caches that filled meanwhile, the queues that drained).
 * llm-d's flow control holds requests the same way past saturation. Pure. The router holds in its
 * flow-control queue (`slo.queue.holdAboveTokens`, src/gateway/gateway.ts); the simulator replays
 * it (`deno task sim:grid --candidate-hold TOKENS`, docs/sim/workloads/README.md).
 */
import type { AdmissionRefusal } from "./admission.ts";
import type { Candidate } from "./types.ts";

/** Whether some healthy instance has at most `holdAboveTokens` prefill tokens waiting. */
export function hasRoom(candidates: readonly Candidate[], holdAboveTokens: number): boolean {
  return candidates.some((c) => c.healthy && c.waitingPrefillTokens <= holdAboveTokens);
}

/**
 * Whether an admitted request is held on arrival: the bound is set and no instance has room, or
 * others are held already (first come first served). Never without a healthy instance: holding
 * would only delay the answer that none can serve.
 */
export function holdsOnArrival(
  candidates: readonly Candidate[],
  holdAboveTokens: number | undefined,
  othersHeld: number,
): boolean {
  if (holdAboveTokens === undefined || !candidates.some((c) => c.healthy)) return false;
  return othersHeld > 0 || !hasRoom(candidates, holdAboveTokens);
}

/** What a held request is told if its wait ends unserved (its `Retry-After` among it). */
export function heldRefusal(holdAboveTokens: number): AdmissionRefusal {
  return {
    admit: false,
    status: 429,
    reason: "load_threshold",
    retryAfterS: 1,
    message: `Every instance has more than ${holdAboveTokens} prompt tokens waiting to prefill.`,
  };
}
