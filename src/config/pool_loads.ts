/**
 * Whether a model's engines load by themselves what the store holds of a prompt's prefix
 * (`kv.poolLoads`). Unset, it follows the key format: the engine connectors those presets name
 * read the store on a miss (vLLM's MooncakeStoreConnector, measured in
 * docs/real_policy_comparison.md; LMCache's connector and SGLang HiCache's storage prefetch by
 * their documentation, not measured here: a best-effort prefetch may load less), while `llumnix`
 * keys and a custom template say nothing about who loads.
 */
const LOADING_PRESETS: ReadonlySet<string> = new Set([
  "vllm-mooncake-store",
  "lmcache",
  "sglang-hicache",
]);

export function poolLoadsOf(kv: { poolLoads?: boolean; keyFormat: string }): boolean {
  return kv.poolLoads ?? LOADING_PRESETS.has(kv.keyFormat);
}
