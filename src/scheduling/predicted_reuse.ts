/**
 * The prompt tokens the router predicts an engine reuses, the figure the engine's own
 * `cached_tokens` is compared with (the `x-tidegate-hit-tokens` header, the hit-mismatch metric,
 * an experiment's hit ratio).
 */
import type { PoolUse } from "./prefill_choice.ts";
import type { Candidate } from "./types.ts";

export interface ReusePlan {
  candidates: readonly Pick<Candidate, "id" | "localPrefixTokens">[];
  poolPrefixTokens: number;
  /** How the chosen engine uses the store's pool (absent: `never`). */
  inputs: { poolUse?: PoolUse };
  /** A disaggregated plan's decode side, with the prefix each decode instance holds. */
  decode?: { candidates: readonly { id: string; prefixTokens?: number }[] };
}

/**
 * The instance's own prefix (a prefill-side candidate's, or a decode instance's that prefills a
 * request itself); where its engine loads the pool's part by itself (`kv.poolLoads`, planned as
 * `always`), the pool's longer prefix: an engine's `cached_tokens` counts both. 0 for an instance
 * the plan does not know.
 */
export function predictedReuseTokens(plan: ReusePlan, instanceId: string): number {
  const local = plan.candidates.find((c) => c.id === instanceId)?.localPrefixTokens ??
    plan.decode?.candidates.find((c) => c.id === instanceId)?.prefixTokens;
  if (local === undefined) return 0;
  return plan.inputs.poolUse === "always" ? Math.max(local, plan.poolPrefixTokens) : local;
}

/**
 * Whether the engine's `cached_tokens` are the reuse predicted above: for a split pair the decode
 * answers, and an SGLang decode copies its prefill's hits, a vLLM 0.32 NIXL one reports them from
 * `remote_prefill_cached_tokens`, but a vLLM Mooncake one reports the KV it received (nearly the
 * whole prompt), which says nothing of hits.
 */
export function reportsReuse(
  plan: { decode?: { protocol: string } },
  record: { prefillInstanceId?: string },
): boolean {
  return !(record.prefillInstanceId && plan.decode?.protocol === "vllm-mooncake");
}
