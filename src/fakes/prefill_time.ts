/**
 * Prefill time of the fake engines: the same model the router's scheduler predicts with
 * (src/scheduling/prefill_model.ts, fitted to docs/compat.md §8), so a simulated engine is exactly as
 * fast as the TTFT policy believes unless a test gives it other coefficients.
 */
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../scheduling/prefill_model.ts";
import type { PrefillModelCoefficients } from "../scheduling/types.ts";

export { MOONCAKE_PREFILL_MODEL };

/** Seconds of (unscaled) engine time to prefill `newTokens` with `cachedTokens` already held. */
export function prefillSeconds(
  newTokens: number,
  cachedTokens = 0,
  model: PrefillModelCoefficients = MOONCAKE_PREFILL_MODEL,
): number {
  return newTokens <= 0 ? 0 : prefillTimeS(model, newTokens, cachedTokens);
}
