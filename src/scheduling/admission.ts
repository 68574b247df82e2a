/**
 * Early rejection (Mooncake §7): refuse a request up front, with HTTP 429 and Retry-After, when
 * even the best instance is predicted to break the TTFT SLO, or the decode side the TBT SLO.
 * Pure: predictions and SLOs in, a verdict out. The caller counts rejections.
 */
export interface AdmissionOptions {
  enabled: boolean;
  /** Time-to-first-token SLO in seconds (unset: not checked). */
  ttftSloS?: number;
  /** Time-between-tokens SLO in seconds (unset: not checked). */
  tbtSloS?: number;
  /** Bounds of the Retry-After value in seconds (default 1 .. 60). */
  minRetryAfterS?: number;
  maxRetryAfterS?: number;
  /** Retry-After for a TBT rejection, when decode slots free up (default 5 s). */
  tbtRetryAfterS?: number;
  /**
   * Requests a decode instance batches (vLLM's `max_num_seqs`; unset: not checked): one more
   * waits for a place, and its first gap breaks any TBT SLO.
   */
  maxDecodeBatch?: number;
}

export interface AdmissionInput {
  /** The decision's best predicted TTFT (`Decision.predictedTtftS`). */
  predictedTtftS?: number;
  /** Predicted TBT on the best decode instance with this request added. */
  predictedTbtS?: number;
  /** Requests decoding there with this one (checked against `maxDecodeBatch`). */
  decodeBatch?: number;
  /** The instance the prediction is for, named in the message. */
  instanceId?: string;
}

/** A refusal: admission's verdict when it does not admit. */
export type AdmissionRefusal = Extract<AdmissionVerdict, { admit: false }>;

export type AdmissionVerdict =
  | { admit: true }
  | {
    admit: false;
    status: 429;
    reason: "ttft_slo" | "tbt_slo" | "load_threshold";
    retryAfterS: number;
    message: string;
  };

export function admit(input: AdmissionInput, options: AdmissionOptions): AdmissionVerdict {
  if (!options.enabled) return { admit: true };
  const where = input.instanceId === undefined
    ? "the best instance"
    : `instance ${input.instanceId}`;
  const { ttftSloS, tbtSloS } = options;
  if (
    ttftSloS !== undefined && input.predictedTtftS !== undefined &&
    input.predictedTtftS > ttftSloS
  ) {
    // The queue has to drain by the excess before a new request would make it.
    const retryAfterS = retryAfter(input.predictedTtftS - ttftSloS, options);
    return {
      admit: false,
      status: 429,
      reason: "ttft_slo",
      retryAfterS,
      message: `Predicted time to first token ${fmt(input.predictedTtftS)} s on ${where} exceeds ` +
        `the TTFT SLO of ${fmt(ttftSloS)} s; retry after ${retryAfterS} s.`,
    };
  }
  const { decodeBatch } = input;
  const { maxDecodeBatch } = options;
  if (maxDecodeBatch !== undefined && decodeBatch !== undefined && decodeBatch > maxDecodeBatch) {
    return tbtRefusal(
      options,
      `The decode side would run ${fmt(decodeBatch)} requests (per instance), past its batch of ` +
        `${maxDecodeBatch}: the request would wait for a place`,
    );
  }
  if (tbtSloS !== undefined && input.predictedTbtS !== undefined && input.predictedTbtS > tbtSloS) {
    return tbtRefusal(
      options,
      `Predicted time between tokens ${fmt(input.predictedTbtS)} s on the decode side ` +
        `exceeds the TBT SLO of ${fmt(tbtSloS)} s`,
    );
  }
  return { admit: true };
}

/** A refusal on the decode side: retried when decode slots free up. */
function tbtRefusal(options: AdmissionOptions, why: string): AdmissionRefusal {
  const retryAfterS = retryAfter(options.tbtRetryAfterS ?? 5, options);
  return {
    admit: false,
    status: 429,
    reason: "tbt_slo",
    retryAfterS,
    message: `${why}; retry after ${retryAfterS} s.`,
  };
}

/** The baseline to beat: refuse when the least loaded instance queues too many prefill tokens. */
export interface LoadThresholdOptions {
  enabled: boolean;
  maxWaitingPrefillTokens: number;
  /** Retry-After in seconds (default 5). */
  retryAfterS?: number;
}

export function admitByLoad(
  minWaitingPrefillTokens: number,
  options: LoadThresholdOptions,
): AdmissionVerdict {
  if (!options.enabled || minWaitingPrefillTokens < options.maxWaitingPrefillTokens) {
    return { admit: true };
  }
  const retryAfterS = Math.max(1, Math.ceil(options.retryAfterS ?? 5));
  return {
    admit: false,
    status: 429,
    reason: "load_threshold",
    retryAfterS,
    message: `Every instance has at least ${minWaitingPrefillTokens} prefill tokens waiting ` +
      `(limit ${options.maxWaitingPrefillTokens}); retry after ${retryAfterS} s.`,
  };
}

function retryAfter(seconds: number, options: AdmissionOptions): number {
  const low = options.minRetryAfterS ?? 1;
  const high = options.maxRetryAfterS ?? 60;
  return Math.min(high, Math.max(low, Math.ceil(seconds)));
}

function fmt(seconds: number): string {
  return seconds.toFixed(seconds < 10 ? 2 : 1);
}
