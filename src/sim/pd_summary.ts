import type { DecodeLoadScope } from "../scheduling/pd_admission.ts";
import type { LocalPrefillMode } from "../scheduling/local_prefill.ts";
import type { DecodeKvView, PdAdmission, PdResult, PdTopology } from "./pd_simulator.ts";
import { type PolicySummary, summarize } from "./summary.ts";

/** One P/D or neutral run's numbers (the `results.json` schema of the P/D mode). */
export interface PdSummary extends PolicySummary {
  policy: string;
  topology: string;
  admission: PdAdmission;
  /** Whose decode load `early`, `predicted` and `committed` judged (absent for the others). */
  decodeLoad?: DecodeLoadScope;
  /** What the router's decode judgments knew of KV (runs with `--decode-kv` only). */
  decodeKv?: DecodeKvView;
  /** Refused at arrival, and after a completed prefill (the baseline's decode-time refusals). */
  rejectedBeforePrefill: number;
  rejectedAfterPrefill: number;
  /** Prompt tokens computed for requests refused afterwards. */
  wastedPrefillTokens: number;
  /** Inter-token gaps of all served requests (the first one includes the KV transfer). */
  tbtP50S: number;
  tbtP90S: number;
  tbtP99S: number;
  /** Share of inter-token gaps within the TBT SLO. */
  tbtSloTokenShare: number;
  /** Share of the requests decoded whose mean gap (TPOT) is within the TBT SLO. */
  tbtSloRequestShare: number;
  /** Requests served within both SLOs: TTFT, and TPOT when there are tokens to decode. */
  withinBothSlos: number;
  /** Mean KV tokens per request of the busy decode batches, sampled (NaN when none was busy). */
  meanBatchKvTokens: number;
  /** Conditional disaggregation's figures, for runs that set `--local-prefill` (any mode). */
  localPrefill?: LocalPrefillSummary;
  /** The flow-control queue's figures, for runs with it (`--pd-queue on`). */
  queue?: PdQueueSummary;
  /**
   * The pools' load over time (pd_simulator.ts `load`): mean, coefficient of variation, and the
   * correlation of the two series (negative: anti-phase).
   */
  load: {
    prefillMean: number;
    prefillCv: number;
    decodeMean: number;
    decodeCv: number;
    correlation: number;
  };
}

export interface PdQueueSummary {
  /**
   * Requests that waited in the queue, and of them those served (the rest timed out, or, with
   * the baseline, were refused after their prefill).
   */
  waited: number;
  servedAfterWait: number;
  /** Mean seconds waited by those served after a wait. */
  meanWaitServedS: number;
}

export interface LocalPrefillSummary {
  mode: LocalPrefillMode;
  maxTokens: number;
  /** Requests prefilled on their decode instance. */
  localPrefills: number;
  /** Requests within both SLOs per second of arrivals (the trace's span at its speed). */
  goodputRps: number;
  /** Prompt tokens prefill instances computed that the decode instance already held. */
  redundantPrefillTokens: number;
  /** Wasted prefill: refused after their prefill (`wastedPrefillTokens`) plus redundant. */
  wastedTotalTokens: number;
}

export function topologyLabel(topology: PdTopology): string {
  if (topology.kind === "pd") return `${topology.prefill}P+${topology.decode}D`;
  return `${topology.instances}N-${
    topology.chunked ? `chunk${topology.chunkTokens ?? ""}` : "whole"
  }`;
}

export function summarizePd(result: PdResult, sloTtftS: number, sloTbtS: number): PdSummary {
  const base = summarize(result, sloTtftS);
  const [p50, p90, p99] = result.tbt.quantiles([0.5, 0.9, 0.99]);
  let decoded = 0, withinTpot = 0, withinBoth = 0;
  result.tpotS.forEach((tpot, i) => {
    const tpotWithin = Number.isNaN(tpot) || tpot <= sloTbtS;
    if (result.ttftS[i] <= sloTtftS && tpotWithin) withinBoth++;
    if (Number.isNaN(tpot)) return;
    decoded++;
    if (tpotWithin) withinTpot++;
  });
  const prefill = moments(result.load.prefill), decode = moments(result.load.decode);
  return {
    policy: result.policy,
    topology: topologyLabel(result.topology),
    admission: result.admission,
    ...(result.decodeLoad ? { decodeLoad: result.decodeLoad } : {}),
    ...(result.decodeKv ? { decodeKv: result.decodeKv } : {}),
    ...base,
    rejectedBeforePrefill: base.rejected - result.rejectedAfterPrefill,
    rejectedAfterPrefill: result.rejectedAfterPrefill,
    wastedPrefillTokens: result.wastedPrefillTokens,
    tbtP50S: p50,
    tbtP90S: p90,
    tbtP99S: p99,
    tbtSloTokenShare: result.tbt.shareAtOrBelow(sloTbtS),
    tbtSloRequestShare: decoded === 0 ? NaN : withinTpot / decoded,
    withinBothSlos: withinBoth,
    meanBatchKvTokens: result.batchKv.sum / result.batchKv.count,
    ...(result.localPrefill ? { localPrefill: localPrefillSummary(result, withinBoth) } : {}),
    ...(result.queueWaitS ? { queue: queueSummary(result.queueWaitS, result.ttftS) } : {}),
    load: {
      prefillMean: prefill.mean,
      prefillCv: prefill.cv,
      decodeMean: decode.mean,
      decodeCv: decode.cv,
      correlation: correlation(result.load.prefill, result.load.decode),
    },
  };
}

function queueSummary(waitS: Float64Array, ttftS: Float64Array): PdQueueSummary {
  let waited = 0, served = 0, servedWaitS = 0;
  waitS.forEach((wait, i) => {
    if (Number.isNaN(wait)) return;
    waited++;
    if (Number.isNaN(ttftS[i])) return;
    served++;
    servedWaitS += wait;
  });
  return {
    waited,
    servedAfterWait: served,
    meanWaitServedS: served === 0 ? NaN : servedWaitS / served,
  };
}

function localPrefillSummary(result: PdResult, withinBoth: number): LocalPrefillSummary {
  const setting = result.localPrefill!;
  return {
    mode: setting.mode,
    maxTokens: setting.maxTokens,
    localPrefills: result.localPrefills,
    goodputRps: result.lastArrivalS > 0 ? withinBoth / result.lastArrivalS : NaN,
    redundantPrefillTokens: result.redundantPrefillTokens,
    wastedTotalTokens: result.wastedPrefillTokens + result.redundantPrefillTokens,
  };
}

function moments(values: readonly number[]): { mean: number; sd: number; cv: number } {
  if (values.length === 0) return { mean: NaN, sd: NaN, cv: NaN };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sd = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length);
  return { mean, sd, cv: mean === 0 ? 0 : sd / mean };
}

/** Pearson correlation (NaN when either series is constant). */
export function correlation(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  if (n < 2) return NaN;
  const ma = moments(a.slice(0, n)), mb = moments(b.slice(0, n));
  if (!(ma.sd > 0 && mb.sd > 0)) return NaN;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += (a[i] - ma.mean) * (b[i] - mb.mean);
  return sum / n / ma.sd / mb.sd;
}
