/**
 * Decode step time (TBT) as a function of the batch: a fixed part (reading the weights) plus a
 * part per running request (reading its KV). An assumption, not a fit: 30 ms + 0.5 ms/request
 * puts LLaMA3-70B on 8×A800 at ~0.1 s per token with 140 requests decoding. Override it.
 */
export interface DecodeModel {
  baseS: number;
  perRequestS: number;
}

export const DEFAULT_DECODE_MODEL: Readonly<DecodeModel> = Object.freeze({
  baseS: 0.03,
  perRequestS: 0.0005,
});

/** Seconds per decode step with `runningRequests` in the batch. */
export function decodeStepS(model: DecodeModel, runningRequests: number): number {
  return model.baseS + model.perRequestS * Math.max(0, runningRequests);
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
