/**
 * Late binding: while every instance already has more prefill waiting than a bound, a request is
 * held by the router instead of joining an engine's queue, and is placed once an instance has room,
 * against the cluster as it is then (the caches that filled meanwhile, the queues that drained).
 * llm-d's flow control holds requests the same way past saturation. Pure. In the simulator only so
 * far (`deno task sim:grid --candidate-hold TOKENS`, docs/sim/workloads/README.md).
 */
import type { Candidate } from "./types.ts";

/** Whether some healthy instance has at most `holdAboveTokens` prefill tokens waiting. */
export function hasRoom(candidates: readonly Candidate[], holdAboveTokens: number): boolean {
  return candidates.some((c) => c.healthy && c.waitingPrefillTokens <= holdAboveTokens);
}
