import { studentTQuantile } from "./distributions.ts";
import { LogHistogram } from "./log_histogram.ts";
import { welchTFromErrors } from "./significance.ts";

/**
 * Cluster-robust statistics for sticky experiments. Assignment is by session (key), so requests
 * of one conversation share cache hits and are correlated; tests that treat every request as
 * independent are too confident (A/A runs with correlated sessions in
 * tests/experiment/clustered_test.ts: a per-request Mann-Whitney test calls far more than 5 % of
 * them significant at α = 5 %). Each key also hashes to one of CLUSTERS buckets; a bucket holds
 * whole sessions, so bucket totals are independent and the variance of a ratio estimate (a mean,
 * or the share of values below a quantile) comes from the spread between buckets (the delta
 * method over random buckets, as large experimentation platforms do). Memory stays bounded: per
 * arm, CLUSTERS small histograms and sums. Pure.
 */

/** Buckets per arm; also the most degrees of freedom a clustered test can have (minus one). */
export const CLUSTERS = 64;

/** Coarser than the main histogram: only used for the share of values below a quantile. */
const CELL_GROWTH = 1.05;

interface Cell {
  n: number;
  sum: number;
  sumLog: number;
  histogram: LogHistogram;
}

/** Values grouped by cluster bucket (0 ≤ cluster < CLUSTERS). */
export class ClusteredSample {
  readonly #cells: (Cell | undefined)[] = new Array(CLUSTERS);
  #count = 0;

  get count(): number {
    return this.#count;
  }

  add(cluster: number, value: number): void {
    const c = Math.min(CLUSTERS - 1, Math.max(0, Math.floor(cluster) || 0));
    let cell = this.#cells[c];
    if (!cell) {
      cell = { n: 0, sum: 0, sumLog: 0, histogram: new LogHistogram(CELL_GROWTH) };
      this.#cells[c] = cell;
    }
    cell.n++;
    cell.sum += value;
    cell.sumLog += Math.log(value);
    cell.histogram.add(value);
    this.#count++;
  }

  /** Non-empty buckets. */
  cells(): Cell[] {
    return this.#cells.filter((c): c is Cell => c !== undefined);
  }
}

/**
 * Variance of the ratio estimate R = Σy / Σn over independent clusters (first-order delta
 * method, with the small-sample factor k/(k − 1)).
 */
export function ratioVariance(cells: readonly { y: number; n: number }[]): number {
  const k = cells.length;
  const total = cells.reduce((s, c) => s + c.n, 0);
  if (k < 2 || total === 0) return NaN;
  const ratio = cells.reduce((s, c) => s + c.y, 0) / total;
  const spread = cells.reduce((s, c) => s + (c.y - ratio * c.n) ** 2, 0);
  return (k / (k - 1)) * spread / total ** 2;
}

export interface ClusteredMean {
  mean: number;
  /** Variance of the mean: the larger of the clustered and the independent-values estimate. */
  variance: number;
  /** Non-empty buckets minus one. */
  df: number;
}

/** The mean of the values (or of their logarithms) with a cluster-robust variance. */
export function clusteredMean(
  sample: ClusteredSample,
  scale: "raw" | "log",
  independentVariance: number,
): ClusteredMean {
  const cells = sample.cells();
  const y = (c: Cell) => (scale === "raw" ? c.sum : c.sumLog);
  const n = sample.count;
  const mean = cells.reduce((s, c) => s + y(c), 0) / n;
  const clustered = ratioVariance(cells.map((c) => ({ y: y(c), n: c.n })));
  // Never claim more precision than independent values would give (few buckets can understate).
  const variance = Math.max(
    Number.isFinite(clustered) ? clustered : 0,
    Number.isFinite(independentVariance) ? independentVariance / n : 0,
  );
  return { mean, variance, df: Math.max(1, cells.length - 1) };
}

export interface ClusteredQuantile {
  /** Confidence bounds from the clustered variance of the share below the quantile. */
  ci: [number | undefined, number | undefined];
  /** Standard error of ln(quantile), for comparing arms. */
  seLog: number;
  df: number;
}

/**
 * A quantile's uncertainty under clustering (Deng, Knoblich & Lu, "Applying the delta method in
 * metric analytics", KDD 2018): the share F of values at or below the estimate has a clustered
 * variance σ²; the interval is the values at ranks n·(q ± t·σ), and ±1σ gives the standard
 * error of ln Q. σ² is never taken below the binomial q(1 − q)/n of independent values.
 */
export function clusteredQuantile(
  sample: ClusteredSample,
  overall: LogHistogram,
  q: number,
  level: number,
): ClusteredQuantile | undefined {
  const n = overall.count;
  const estimate = overall.quantile(q);
  if (estimate === undefined || n === 0) return undefined;
  const cells = sample.cells();
  const clustered = ratioVariance(
    cells.map((c) => ({ y: c.histogram.countAtOrBelow(estimate), n: c.n })),
  );
  const sigma = Math.sqrt(
    Math.max(Number.isFinite(clustered) ? clustered : 0, (q * (1 - q)) / n),
  );
  const df = Math.max(1, cells.length - 1);
  const t = studentTQuantile(1 - (1 - level) / 2, df);
  const at = (share: number) =>
    share <= 0 || share > 1 ? undefined : overall.valueAtRank(Math.max(1, Math.ceil(share * n)));
  const below = at(q - sigma) ?? overall.valueAtRank(1)!;
  const above = at(q + sigma) ?? overall.valueAtRank(n)!;
  // Quantization floor: a bucket of the main histogram is 1 % wide.
  const seLog = Math.max((Math.log(above) - Math.log(below)) / 2, Math.log(overall.growth) / 3.5);
  return { ci: [at(q - t * sigma), at(q + t * sigma)], seLog, df };
}

export interface ClusteredTest {
  /** Arm over control (of the quantile, or of the geometric mean). */
  ratio: number;
  /** Two-sided. */
  p: number;
}

/** Welch-style test of ln(arm) − ln(control) from two estimates with standard errors. */
export function logRatioTest(
  arm: { log: number; se: number; df: number },
  control: { log: number; se: number; df: number },
): ClusteredTest {
  const difference = arm.log - control.log;
  const { p } = welchTFromErrors(
    difference,
    { se2: arm.se ** 2, df: arm.df },
    { se2: control.se ** 2, df: control.df },
  );
  return { ratio: Math.exp(difference), p };
}
