/**
 * Decode step time (TBT) as a function of the batch: a fixed part (reading the weights), a part per
 * running request, and optionally a part per KV token in the batch (every step reads each running
 * request's whole context). An assumption, not a fit: 30 ms + 0.5 ms/request puts LLaMA3-70B on
 * 8×A800 at ~0.1 s per token with 140 requests decoding. Override it.
 */
export interface DecodeModel {
  baseS: number;
  perRequestS: number;
  /**
   * Seconds per KV token of the running batch (0 when absent). 4e-8 is 40 ms per million tokens:
   * 320 KB/token read at ~8 TB/s, half the HBM bandwidth of 8×A800.
   */
  perKvTokenS?: number;
  /**
   * KV tokens assumed per running request when the caller knows only the batch size (the
   * router's predictions); 0 when absent, i.e. the KV term is then ignored.
   */
  kvTokensPerRequest?: number;
}

export const DEFAULT_DECODE_MODEL: Readonly<DecodeModel> = Object.freeze({
  baseS: 0.03,
  perRequestS: 0.0005,
});

/**
 * Seconds per decode step with `runningRequests` in the batch holding `kvTokens` KV tokens in all
 * (default: `kvTokensPerRequest` per request). Without a KV term this is `baseS + perRequestS·n`.
 */
export function decodeStepS(
  model: DecodeModel,
  runningRequests: number,
  kvTokens?: number,
): number {
  const n = Math.max(0, runningRequests);
  const step = model.baseS + model.perRequestS * n;
  const perKv = model.perKvTokenS ?? 0;
  if (perKv === 0) return step;
  const kv = kvTokens ?? n * (model.kvTokensPerRequest ?? 0);
  return step + perKv * Math.max(0, kv);
}

/**
 * Predicted TBT on the least busy decode instance once this request joins it; undefined with no
 * instance to decode on (that is "no healthy instance", not an SLO breach).
 */
export function predictTbtS(
  model: DecodeModel,
  runningRequestsPerInstance: readonly number[],
): number | undefined {
  if (runningRequestsPerInstance.length === 0) return undefined;
  return decodeStepS(model, Math.min(...runningRequestsPerInstance) + 1);
}

/** The largest batch whose step (at `kvTokensPerRequest` each) stays within the SLO; at least 1. */
export function maxBatchWithin(model: DecodeModel, sloS: number): number {
  let n = 1;
  while (n < 100_000 && decodeStepS(model, n + 1) <= sloS) n++;
  return n;
}
