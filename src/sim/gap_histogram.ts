/**
 * Inter-token gaps (TBT) counted in fixed 0.1 ms bins up to 60 s (longer ones kept exactly):
 * millions of gaps per run at one array write each, percentiles to 0.1 ms.
 */
export class GapHistogram {
  static readonly BIN_S = 1e-4;
  readonly #bins = new Float64Array(600_000);
  readonly #over: number[] = [];
  #count = 0;
  #sum = 0;

  get count(): number {
    return this.#count;
  }

  get meanS(): number {
    return this.#count === 0 ? NaN : this.#sum / this.#count;
  }

  add(gapS: number): void {
    const v = Math.max(0, gapS);
    const bin = Math.floor(v / GapHistogram.BIN_S);
    if (bin < this.#bins.length) this.#bins[bin]++;
    else this.#over.push(v);
    this.#count++;
    this.#sum += v;
  }

  /** Nearest-rank quantile (the upper edge of its bin), NaN when empty. */
  quantile(q: number): number {
    return this.quantiles([q])[0];
  }

  /** Nearest-rank quantiles for ascending `qs`, in one pass over the bins. */
  quantiles(qs: readonly number[]): number[] {
    if (this.#count === 0) return qs.map(() => NaN);
    const ranks = qs.map((q) => Math.min(this.#count, Math.max(1, Math.ceil(q * this.#count))));
    const out: number[] = [];
    let seen = 0, k = 0;
    for (let bin = 0; bin < this.#bins.length && k < ranks.length; bin++) {
      seen += this.#bins[bin];
      while (k < ranks.length && seen >= ranks[k]) {
        out.push((bin + 1) * GapHistogram.BIN_S);
        k++;
      }
    }
    if (k < ranks.length) {
      const over = [...this.#over].sort((a, b) => a - b);
      for (; k < ranks.length; k++) out.push(over[ranks[k] - seen - 1]);
    }
    return out;
  }

  /** Share of gaps at or below `limitS` (to the bin). */
  shareAtOrBelow(limitS: number): number {
    if (this.#count === 0) return NaN;
    const last = Math.min(this.#bins.length, Math.floor(limitS / GapHistogram.BIN_S));
    let seen = 0;
    for (let bin = 0; bin < last; bin++) seen += this.#bins[bin];
    if (last === this.#bins.length) seen += this.#over.filter((v) => v <= limitS).length;
    return seen / this.#count;
  }

  /** `points` evenly spaced quantiles, ascending (the values of a CDF chart). */
  cdfValues(points = 400): number[] {
    return this.quantiles(Array.from({ length: points }, (_, j) => (j + 1) / points));
  }
}
