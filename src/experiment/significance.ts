import { normalTwoSidedP, studentTTwoSidedP } from "./distributions.ts";

/** Count, mean and variance of a stream (Welford's update: stable for millions of values). */
export class Moments {
  count = 0;
  mean = 0;
  #m2 = 0;

  add(value: number): void {
    this.count++;
    const delta = value - this.mean;
    this.mean += delta / this.count;
    this.#m2 += delta * (value - this.mean);
  }

  /** Sample variance (n − 1); NaN below two values. */
  get variance(): number {
    return this.count < 2 ? NaN : this.#m2 / (this.count - 1);
  }
}

export interface MannWhitneyResult {
  /** U of the first sample: pairs (a, b) with a > b, ties counting ½. */
  u: number;
  /** Normal approximation with tie and continuity corrections (scipy's `asymptotic` method). */
  z: number;
  p: number;
  /** P(b < a) + ½·P(b = a): above ½ means the second sample tends to be smaller. */
  probabilitySecondSmaller: number;
}

/**
 * Mann-Whitney U from tie groups in ascending order of value, each with how many values of
 * each sample it holds (raw samples: one group per distinct value; histograms: one per bucket).
 */
export function mannWhitneyGroups(
  groups: Iterable<{ a: number; b: number }>,
): MannWhitneyResult {
  let rankSumA = 0, nA = 0, nB = 0, tieTerm = 0, below = 0;
  for (const { a, b } of groups) {
    const size = a + b;
    if (size === 0) continue;
    const meanRank = below + (size + 1) / 2;
    rankSumA += a * meanRank;
    nA += a;
    nB += b;
    tieTerm += size ** 3 - size;
    below += size;
  }
  const n = nA + nB;
  if (nA === 0 || nB === 0) return { u: NaN, z: NaN, p: NaN, probabilitySecondSmaller: NaN };
  const u = rankSumA - (nA * (nA + 1)) / 2;
  const mean = (nA * nB) / 2;
  const variance = ((nA * nB) / 12) * (n + 1 - tieTerm / (n * (n - 1)));
  let z = 0, p = 1;
  if (variance > 0) {
    const excess = Math.max(0, Math.abs(u - mean) - 0.5);
    z = Math.sign(u - mean) * excess / Math.sqrt(variance);
    p = normalTwoSidedP(z);
  }
  return { u, z, p, probabilitySecondSmaller: u / (nA * nB) };
}

/** Mann-Whitney U of two raw samples (exact values, equal values as ties). */
export function mannWhitneyU(a: readonly number[], b: readonly number[]): MannWhitneyResult {
  const tagged = [
    ...a.map((value) => ({ value, first: true })),
    ...b.map((value) => ({ value, first: false })),
  ].sort((x, y) => x.value - y.value);
  const groups: { a: number; b: number }[] = [];
  let previous = NaN;
  for (const { value, first } of tagged) {
    if (value !== previous) groups.push({ a: 0, b: 0 });
    const group = groups[groups.length - 1];
    if (first) group.a++;
    else group.b++;
    previous = value;
  }
  return mannWhitneyGroups(groups);
}

export interface WelchResult {
  /** (mean A − mean B) / standard error. */
  t: number;
  /** Welch-Satterthwaite degrees of freedom. */
  df: number;
  p: number;
}

/** Welch's unequal-variance t-test from each sample's count, mean and variance. */
export function welchT(
  a: { count: number; mean: number; variance: number },
  b: { count: number; mean: number; variance: number },
): WelchResult {
  if (a.count < 2 || b.count < 2) return { t: NaN, df: NaN, p: NaN };
  return welchTFromErrors(
    a.mean - b.mean,
    { se2: a.variance / a.count, df: a.count - 1 },
    { se2: b.variance / b.count, df: b.count - 1 },
  );
}

/**
 * Welch's t-test of a difference between two independent estimates, from each one's squared
 * standard error and degrees of freedom (Welch-Satterthwaite); a normal p when those are not
 * finite. Shared by the per-request test above and the session-clustered ones.
 */
export function welchTFromErrors(
  difference: number,
  a: { se2: number; df: number },
  b: { se2: number; df: number },
): WelchResult {
  const se2 = a.se2 + b.se2;
  if (!(se2 > 0)) {
    return difference === 0
      ? { t: 0, df: a.df + b.df, p: 1 }
      : { t: Math.sign(difference) * Infinity, df: a.df + b.df, p: 0 };
  }
  const t = difference / Math.sqrt(se2);
  const df = se2 ** 2 / (a.se2 ** 2 / a.df + b.se2 ** 2 / b.df);
  return { t, df, p: Number.isFinite(df) ? studentTTwoSidedP(t, df) : normalTwoSidedP(t) };
}

/** Welch's t-test of two raw samples. */
export function welchTSamples(a: readonly number[], b: readonly number[]): WelchResult {
  const moments = (values: readonly number[]) => {
    const m = new Moments();
    for (const v of values) m.add(v);
    return { count: m.count, mean: m.mean, variance: m.variance };
  };
  return welchT(moments(a), moments(b));
}
