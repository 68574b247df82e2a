import { binomialCdf } from "./distributions.ts";

/**
 * Counts of positive values in logarithmic buckets (each `growth` times wider than the last), so
 * memory is bounded by the spread of the values, not their number: with 1 % buckets, 1 ms to
 * 20 min fits in ~1,400 buckets. A value is represented by its bucket's geometric midpoint
 * (within ±0.5 %). Ranks, quantiles with order-statistic confidence intervals, and the tie groups
 * of a rank test are all read from the buckets. Pure.
 */
export class LogHistogram {
  readonly growth: number;
  readonly #logGrowth: number;
  readonly #counts = new Map<number, number>();
  #count = 0;
  #sorted?: [number, number][];

  constructor(growth = 1.01) {
    if (!(growth > 1)) throw new RangeError(`LogHistogram growth must be > 1, got ${growth}`);
    this.growth = growth;
    this.#logGrowth = Math.log(growth);
  }

  get count(): number {
    return this.#count;
  }

  /** Adds a value; non-finite or non-positive values are clamped into [1e-9, 1e9]. */
  add(value: number): void {
    const v = Math.min(1e9, Math.max(1e-9, Number.isFinite(value) ? value : 1e9));
    const index = this.bucketOf(v);
    this.#counts.set(index, (this.#counts.get(index) ?? 0) + 1);
    this.#count++;
    this.#sorted = undefined;
  }

  bucketOf(value: number): number {
    return Math.floor(Math.log(value) / this.#logGrowth);
  }

  /** The value a bucket stands for: its geometric midpoint. */
  bucketValue(index: number): number {
    return Math.exp((index + 0.5) * this.#logGrowth);
  }

  /** `[bucket, count]` in ascending order of value. */
  buckets(): readonly (readonly [number, number])[] {
    if (!this.#sorted) this.#sorted = [...this.#counts].sort((a, b) => a[0] - b[0]);
    return this.#sorted;
  }

  /** The r-th smallest value (1-based), or undefined outside [1, count]. */
  valueAtRank(rank: number): number | undefined {
    if (!(rank >= 1 && rank <= this.#count)) return undefined;
    let seen = 0;
    for (const [index, count] of this.buckets()) {
      seen += count;
      if (seen >= rank) return this.bucketValue(index);
    }
    return undefined;
  }

  /** Values in buckets up to and including the bucket of `value`. */
  countAtOrBelow(value: number): number {
    const last = this.bucketOf(value);
    let seen = 0;
    for (const [index, count] of this.buckets()) {
      if (index > last) break;
      seen += count;
    }
    return seen;
  }

  /** Nearest-rank quantile: the ⌈q·n⌉-th smallest value (undefined when empty). */
  quantile(q: number): number | undefined {
    if (this.#count === 0) return undefined;
    return this.valueAtRank(Math.min(this.#count, Math.max(1, Math.ceil(q * this.#count))));
  }

  /**
   * A distribution-free confidence interval for the q-quantile from order statistics: the
   * ranks come from Binomial(n, q), so the coverage is at least `level` whatever the
   * distribution. A bound is undefined when n is too small to have one (e.g. p99 with n < 300).
   */
  quantileCi(q: number, level = 0.95): [number | undefined, number | undefined] {
    const [lower, upper] = quantileCiRanks(this.#count, q, level);
    return [this.valueAtRank(lower), this.valueAtRank(upper)];
  }
}

/**
 * Ranks (1-based) [l, u] with P(X(l) ≤ ξq ≤ X(u)) ≥ level: l is the largest rank with
 * P(B ≤ l − 1) ≤ α/2 and u the smallest with P(B ≤ u − 1) ≥ 1 − α/2, B ~ Binomial(n, q).
 * l = 0 or u = n + 1 mean "no bound on that side".
 */
export function quantileCiRanks(n: number, q: number, level = 0.95): [number, number] {
  if (n <= 0) return [0, 1];
  const alpha = 1 - level;
  // F(k) = P(B ≤ k) is increasing in k: binary search both ends.
  let lo = 0, hi = n + 1; // largest l in [0, n + 1] with F(l - 1) <= alpha / 2
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (binomialCdf(mid - 1, n, q) <= alpha / 2) lo = mid;
    else hi = mid - 1;
  }
  const lower = lo;
  lo = 1;
  hi = n + 1; // smallest u in [1, n + 1] with F(u - 1) >= 1 - alpha / 2
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (binomialCdf(mid - 1, n, q) >= 1 - alpha / 2) hi = mid;
    else lo = mid + 1;
  }
  return [lower, lo];
}
