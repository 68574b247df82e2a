import type { SimResult } from "./simulator.ts";

/** The numbers compared across policies (the `results.json` schema). */
export interface PolicySummary {
  meanTtftS: number;
  p50TtftS: number;
  p90TtftS: number;
  p99TtftS: number;
  /** Requests served within the TTFT SLO, over all requests (a rejection is a miss). */
  sloAttainment: number;
  rejected: number;
  /** Prompt tokens reused (local or transferred) over prompt tokens of served requests. */
  hitRatio: number;
  /** Prompt tokens computed. */
  prefillTokens: number;
  requests: number;
  served: number;
  transferTokens: number;
  /** Mean |predicted − simulated| TTFT of served requests. */
  meanAbsPredictionErrorS: number;
  /** Mean time per output token, when decode is simulated. */
  meanTpotS?: number;
  /** Busiest instance's busy time over the mean busy time (1 = perfectly even). */
  busyImbalance: number;
}

/** The parts of a replay's result the summary reads (a P/D replay has them too). */
export type SummaryInput = Pick<
  SimResult,
  | "ttftS"
  | "promptTokens"
  | "reusedTokens"
  | "transferTokens"
  | "predictedTtftS"
  | "tpotS"
  | "rejectedByReason"
  | "busyS"
>;

export function summarize(result: SummaryInput, sloTtftS: number): PolicySummary {
  const ttfts: number[] = [];
  let prompt = 0, reused = 0, transfer = 0, withinSlo = 0, errorSum = 0, errors = 0;
  let tpotSum = 0, tpots = 0;
  for (let i = 0; i < result.ttftS.length; i++) {
    const ttft = result.ttftS[i];
    if (Number.isNaN(ttft)) continue;
    ttfts.push(ttft);
    prompt += result.promptTokens[i];
    reused += result.reusedTokens[i];
    transfer += result.transferTokens[i];
    if (ttft <= sloTtftS) withinSlo++;
    if (!Number.isNaN(result.predictedTtftS[i])) {
      errorSum += Math.abs(result.predictedTtftS[i] - ttft);
      errors++;
    }
    if (!Number.isNaN(result.tpotS[i])) {
      tpotSum += result.tpotS[i];
      tpots++;
    }
  }
  ttfts.sort((a, b) => a - b);
  const requests = result.ttftS.length;
  const busyMean = result.busyS.reduce((a, b) => a + b, 0) / Math.max(1, result.busyS.length);
  const summary: PolicySummary = {
    meanTtftS: ttfts.reduce((a, b) => a + b, 0) / Math.max(1, ttfts.length),
    p50TtftS: percentile(ttfts, 0.5),
    p90TtftS: percentile(ttfts, 0.9),
    p99TtftS: percentile(ttfts, 0.99),
    sloAttainment: requests === 0 ? 0 : withinSlo / requests,
    rejected: Object.values(result.rejectedByReason).reduce((a, b) => a + b, 0),
    hitRatio: prompt === 0 ? 0 : reused / prompt,
    prefillTokens: prompt - reused,
    requests,
    served: ttfts.length,
    transferTokens: transfer,
    meanAbsPredictionErrorS: errors === 0 ? 0 : errorSum / errors,
    busyImbalance: busyMean === 0 ? 1 : Math.max(...result.busyS) / busyMean,
  };
  if (tpots > 0) summary.meanTpotS = tpotSum / tpots;
  return summary;
}

/** The mean of `values`; NaN when there are none. */
export function mean(values: readonly number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Nearest-rank percentile of sorted values (NaN when empty). */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}
