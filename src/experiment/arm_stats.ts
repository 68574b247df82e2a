import type { AssignmentKind } from "../contracts.ts";
import {
  clusteredMean,
  clusteredQuantile,
  ClusteredSample,
  type ClusteredTest,
  CLUSTERS,
  logRatioTest,
} from "./clustered.ts";
import { studentTQuantile } from "./distributions.ts";
import { LogHistogram } from "./log_histogram.ts";
import { mannWhitneyGroups, type MannWhitneyResult, Moments, welchT } from "./significance.ts";

/**
 * Per-arm statistics of an experiment, fed the same way by the live gateway (one observation per
 * finished request) and by the simulator (one per replayed request), so both print the same
 * report. Memory per arm is bounded: TTFTs go into a log-bucketed histogram plus running moments,
 * and per cluster bucket (src/experiment/clustered.ts) for session-robust intervals and tests.
 */

/** One finished request, reduced to what the comparison needs. */
export interface ArmObservation {
  arm: string;
  /** served: a response streamed (TTFT known); rejected: 429; error: the router or engines failed. */
  outcome: "served" | "rejected" | "error" | "aborted" | "other";
  ttftS?: number;
  /** How the request came to its arm: overridden requests are counted but kept out of the stats. */
  assignment?: AssignmentKind;
  /** Cluster bucket of the request's key (0 ≤ c < CLUSTERS); spread evenly when absent. */
  cluster?: number;
  /** Prompt tokens and the predicted (or, in the simulator, actual) reused prefix. */
  promptTokens?: number;
  hitTokens?: number;
  /** What the engine reported (`usage.prompt_tokens_details.cached_tokens`), when it did. */
  engineCachedTokens?: number;
  enginePromptTokens?: number;
}

export const CONFIDENCE_LEVEL = 0.95;

/** Streaming TTFT summary: histogram for quantiles and ranks, moments for mean and log-mean. */
export class TtftStore {
  readonly histogram = new LogHistogram();
  readonly raw = new Moments();
  readonly log = new Moments();
  readonly clusters = new ClusteredSample();

  add(seconds: number, cluster: number): void {
    const v = Math.max(1e-9, seconds);
    this.histogram.add(v);
    this.raw.add(v);
    this.log.add(Math.log(v));
    this.clusters.add(cluster, v);
  }

  get count(): number {
    return this.raw.count;
  }
}

export class ArmTally {
  served = 0;
  rejected = 0;
  errors = 0;
  aborted = 0;
  other = 0;
  overridden = 0;
  /** Requests without a key value, assigned by the fallback rule. */
  unkeyed = 0;
  promptTokens = 0;
  hitTokens = 0;
  engineCachedTokens = 0;
  enginePromptTokens = 0;
  readonly ttft = new TtftStore();
  #nextCluster = 0;

  /** Every recorded request: each counts under exactly one outcome, or as overridden. */
  get requests(): number {
    return this.served + this.rejected + this.errors + this.aborted + this.other +
      this.overridden;
  }

  record(observation: ArmObservation): void {
    if (observation.assignment === "override") {
      this.overridden++;
      return;
    }
    if (observation.assignment === "fallback") this.unkeyed++;
    switch (observation.outcome) {
      case "served":
        this.served++;
        if (observation.ttftS !== undefined && Number.isFinite(observation.ttftS)) {
          this.ttft.add(observation.ttftS, observation.cluster ?? this.#nextCluster++ % CLUSTERS);
        }
        break;
      case "rejected":
        this.rejected++;
        break;
      case "error":
        this.errors++;
        break;
      case "aborted":
        this.aborted++;
        break;
      default:
        this.other++;
    }
    if (observation.promptTokens !== undefined && observation.promptTokens > 0) {
      this.promptTokens += observation.promptTokens;
      this.hitTokens += Math.min(observation.hitTokens ?? 0, observation.promptTokens);
    }
    if (
      observation.engineCachedTokens !== undefined &&
      observation.enginePromptTokens !== undefined &&
      observation.enginePromptTokens > 0
    ) {
      this.engineCachedTokens += observation.engineCachedTokens;
      this.enginePromptTokens += observation.enginePromptTokens;
    }
  }
}

export type Interval = [number | null, number | null];

export interface TtftSummary {
  /** TTFT samples (served requests that are not overridden). */
  n: number;
  mean: number | null;
  meanCi: Interval;
  p50: number | null;
  p50Ci: Interval;
  p90: number | null;
  p90Ci: Interval;
  p99: number | null;
  p99Ci: Interval;
}

export interface ArmReport {
  name: string;
  policy: string;
  weight: number;
  requests: number;
  served: number;
  /**
   * Seconds; 95 % intervals: the wider of the distribution-free one (order statistics for
   * quantiles, t for the mean) and the session-clustered one.
   */
  ttft: TtftSummary;
  /** Reused prefix tokens over prompt tokens (router's prediction live; actual in the sim). */
  hitRatio: number | null;
  /** Engine-reported cached tokens over the engine's prompt tokens, when engines report them. */
  engineHitRatio: number | null;
  rejected: number;
  errors: number;
  aborted: number;
  unkeyed: number;
  overridden: number;
}

export interface ArmComparison {
  arm: string;
  control: string;
  n: { arm: number; control: number };
  /** Relative change of the arm against the control: −0.23 = 23 % lower (faster). */
  meanChange: number | null;
  p50Change: number | null;
  p90Change: number | null;
  p99Change: number | null;
  /** p90 of the arm over the control's, session-clustered test (the verdict's headline). */
  p90Test: ClusteredTest | null;
  /** Geometric mean (Welch on log-TTFT) of the arm over the control's, session-clustered. */
  geometricMean: ClusteredTest | null;
  /** Mann-Whitney U on TTFT (control first), treating requests as independent. */
  mannWhitney: MannWhitneyResult;
  /** Welch's t on log-TTFT (arm minus control), treating requests as independent. */
  welchLogTtft: { t: number | null; df: number | null; p: number | null; ratio: number | null };
  /** The p90 difference is significant at 5 %. */
  significant: boolean;
}

export const SIGNIFICANCE = 0.05;

/** An arm's row of the report. */
export function armReport(
  arm: { name: string; policy: string; weight: number },
  tally: ArmTally,
  level = CONFIDENCE_LEVEL,
): ArmReport {
  return {
    name: arm.name,
    policy: arm.policy,
    weight: arm.weight,
    requests: tally.requests,
    served: tally.served,
    ttft: summarizeTtft(tally.ttft, level),
    hitRatio: tally.promptTokens > 0 ? tally.hitTokens / tally.promptTokens : null,
    engineHitRatio: tally.enginePromptTokens > 0
      ? tally.engineCachedTokens / tally.enginePromptTokens
      : null,
    rejected: tally.rejected,
    errors: tally.errors,
    aborted: tally.aborted,
    unkeyed: tally.unkeyed,
    overridden: tally.overridden,
  };
}

export function summarizeTtft(store: TtftStore, level = CONFIDENCE_LEVEL): TtftSummary {
  const n = store.count;
  const h = store.histogram;
  const quantile = (q: number): [number | null, Interval] => {
    // The wider of the exact order-statistic interval (independent requests) and the
    // session-clustered one.
    const [lo, hi] = h.quantileCi(q, level);
    const clustered = clusteredQuantile(store.clusters, h, q, level)?.ci ?? [lo, hi];
    const widest = (a: number | undefined, b: number | undefined, pick: typeof Math.min) =>
      a === undefined || b === undefined ? null : pick(a, b);
    return [h.quantile(q) ?? null, [
      widest(lo, clustered[0], Math.min),
      widest(hi, clustered[1], Math.max),
    ]];
  };
  const [p50, p50Ci] = quantile(0.5);
  const [p90, p90Ci] = quantile(0.9);
  const [p99, p99Ci] = quantile(0.99);
  let meanCi: Interval = [null, null];
  if (n >= 2) {
    const m = clusteredMean(store.clusters, "raw", store.raw.variance);
    const half = studentTQuantile(1 - (1 - level) / 2, m.df) * Math.sqrt(m.variance);
    meanCi = [Math.max(0, m.mean - half), m.mean + half];
  }
  return {
    n,
    mean: n > 0 ? store.raw.mean : null,
    meanCi,
    p50,
    p50Ci,
    p90,
    p90Ci,
    p99,
    p99Ci,
  };
}

/** Compares an arm with the control arm on TTFT. */
export function compareArms(
  arm: { report: ArmReport; tally: ArmTally },
  control: { report: ArmReport; tally: ArmTally },
): ArmComparison {
  const change = (x: number | null, reference: number | null) =>
    x === null || reference === null || reference === 0 ? null : (x - reference) / reference;
  const a = arm.report.ttft, c = control.report.ttft;
  const mannWhitney = mannWhitneyGroups(
    mergeBuckets(control.tally.ttft.histogram, arm.tally.ttft.histogram),
  );
  const log = (m: Moments) => ({ count: m.count, mean: m.mean, variance: m.variance });
  const welch = welchT(log(arm.tally.ttft.log), log(control.tally.ttft.log));
  const finite = (x: number) => (Number.isFinite(x) ? x : null);
  const armTtft = arm.tally.ttft, controlTtft = control.tally.ttft;
  let p90Test: ClusteredTest | null = null, geometricMean: ClusteredTest | null = null;
  if (armTtft.count >= 2 && controlTtft.count >= 2) {
    const p90Of = (t: TtftStore) => {
      const q = clusteredQuantile(t.clusters, t.histogram, 0.9, CONFIDENCE_LEVEL)!;
      return { log: Math.log(t.histogram.quantile(0.9)!), se: q.seLog, df: q.df };
    };
    p90Test = logRatioTest(p90Of(armTtft), p90Of(controlTtft));
    const logMeanOf = (t: TtftStore) => {
      const m = clusteredMean(t.clusters, "log", t.log.variance);
      return { log: m.mean, se: Math.sqrt(m.variance), df: m.df };
    };
    geometricMean = logRatioTest(logMeanOf(armTtft), logMeanOf(controlTtft));
  }
  return {
    arm: arm.report.name,
    control: control.report.name,
    n: { arm: a.n, control: c.n },
    meanChange: change(a.mean, c.mean),
    p50Change: change(a.p50, c.p50),
    p90Change: change(a.p90, c.p90),
    p99Change: change(a.p99, c.p99),
    p90Test,
    geometricMean,
    mannWhitney,
    welchLogTtft: {
      t: finite(welch.t),
      df: finite(welch.df),
      p: finite(welch.p),
      ratio: a.n > 0 && c.n > 0
        ? Math.exp(arm.tally.ttft.log.mean - control.tally.ttft.log.mean)
        : null,
    },
    significant: p90Test !== null && p90Test.p < SIGNIFICANCE,
  };
}

/** Tie groups of two histograms over the union of their buckets, ascending. */
function* mergeBuckets(
  first: LogHistogram,
  second: LogHistogram,
): Generator<{ a: number; b: number }> {
  const a = first.buckets(), b = second.buckets();
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && a[i][0] < b[j][0])) yield { a: a[i++][1], b: 0 };
    else if (i >= a.length || b[j][0] < a[i][0]) yield { a: 0, b: b[j++][1] };
    else yield { a: a[i++][1], b: b[j++][1] };
  }
}
