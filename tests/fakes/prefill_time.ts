/**
 * Prefill-time model of the fake engines (compat.md §8): seconds to prefill `newTokens` uncached
 * tokens on top of `cachedTokens` already held, with token counts in thousands:
 *
 *   T = constant + linear·n_new + quadratic·n_new·(n_new + 2·n_cached)
 *
 * The quadratic term is attention: each new token attends to every earlier token, cached or not.
 * With nothing cached it is the Mooncake FAST'25 fit `0.1157·n + 0.000775·n²` (LLaMA3-70B, 8×A800).
 */
import type { PrefillModelCoefficients } from "../../src/scheduling/types.ts";

/** Mooncake FAST'25 fit: 128k uncached tokens take ~27.5 s. */
export const MOONCAKE_PREFILL_MODEL: Readonly<PrefillModelCoefficients> = Object.freeze({
  linear: 0.1157,
  quadratic: 0.000775,
  constant: 0,
});

/** Seconds of (unscaled) engine time to prefill `newTokens` with `cachedTokens` already held. */
export function prefillSeconds(
  newTokens: number,
  cachedTokens = 0,
  model: PrefillModelCoefficients = MOONCAKE_PREFILL_MODEL,
): number {
  const n = Math.max(0, newTokens) / 1000;
  const c = Math.max(0, cachedTokens) / 1000;
  if (n === 0) return 0;
  return (model.constant ?? 0) + model.linear * n + model.quadratic * n * (n + 2 * c);
}
