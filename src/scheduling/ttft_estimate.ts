import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "./prefill_model.ts";
import type { Candidate, PrefillModelCoefficients, ScheduleRequest } from "./types.ts";

/** What a TTFT prediction needs besides the candidate (docs/compat.md §8 defaults). */
export interface TtftModelParams {
  /** Used for candidates that carry no learned `prefillModel`. */
  prefillModel: PrefillModelCoefficients;
  /** KV cache bytes per token (LLaMA3-70B: 80 layers × 8 KV heads × 128 × 2 × 2 B = 320 KB). */
  kvBytesPerToken: number;
  /** Bandwidth of one pool-to-instance transfer, bytes per second. */
  transferBytesPerS: number;
  /**
   * Mooncake Algorithm 1: load the pool prefix only when `pool / local > threshold`
   * (any pool prefix counts when the local one is empty); else recompute from the local prefix.
   */
  balancingThreshold: number;
  /** Request size assumed when a candidate reports queued tokens but not how many requests. */
  queueReferenceTokens: number;
}

export const DEFAULT_TTFT_PARAMS: Readonly<TtftModelParams> = Object.freeze({
  prefillModel: MOONCAKE_PREFILL_MODEL,
  kvBytesPerToken: 327_680,
  transferBytesPerS: 85e9,
  balancingThreshold: 1,
  queueReferenceTokens: 8192,
});

/** The three Mooncake terms for one candidate, plus the token split behind them. */
export interface TtftEstimate {
  queueS: number;
  transferS: number;
  prefillS: number;
  totalS: number;
  /** Prefix tokens reused (local, plus transferred ones when a transfer is planned). */
  reusedTokens: number;
  transferTokens: number;
  newTokens: number;
}

/** Seconds of prefill work queued on the candidate, through the prefill-time model. */
export function estimateQueueS(
  candidate: Candidate,
  model: PrefillModelCoefficients,
  params: Pick<TtftModelParams, "queueReferenceTokens">,
): number {
  if (candidate.queuedPrefillS !== undefined) return Math.max(0, candidate.queuedPrefillS);
  const tokens = Math.max(0, candidate.waitingPrefillTokens);
  if (tokens === 0) return 0;
  // Pricing the whole queue as one prompt would square it; split it into its requests instead.
  const requests =
    candidate.waitingPrefillRequests !== undefined && candidate.waitingPrefillRequests > 0
      ? candidate.waitingPrefillRequests
      : Math.ceil(tokens / params.queueReferenceTokens);
  return requests * prefillTimeS(model, tokens / requests, 0);
}

/**
 * Predicted TTFT on one candidate: T_queue + T_transfer + T_prefill (Mooncake Algorithm 1).
 * With `allowTransfer: false` only the local prefix is reused (engines without a shared pool).
 */
export function estimateTtft(
  request: ScheduleRequest,
  candidate: Candidate,
  params: TtftModelParams,
  options: { allowTransfer?: boolean } = {},
): TtftEstimate {
  const model = candidate.prefillModel ?? params.prefillModel;
  const prompt = Math.max(0, request.promptTokens);
  // The last prompt token is always computed: the engine needs its logits.
  const reusable = Math.max(0, prompt - 1);
  const local = clamp(candidate.localPrefixTokens, 0, reusable);
  const pool = Math.max(local, clamp(request.poolPrefixTokens, 0, reusable));
  const transfer = (options.allowTransfer ?? true) && pool > local &&
    (local === 0 || pool / local > params.balancingThreshold);
  const reused = transfer ? pool : local;
  const transferTokens = reused - local;
  const queueS = estimateQueueS(candidate, model, params);
  const transferS = transferTokens * params.kvBytesPerToken / params.transferBytesPerS;
  const prefillS = prefillTimeS(model, prompt - reused, reused);
  return {
    queueS,
    transferS,
    prefillS,
    totalS: queueS + transferS + prefillS,
    reusedTokens: reused,
    transferTokens,
    newTokens: prompt - reused,
  };
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}
