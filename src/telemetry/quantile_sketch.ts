/**
 * A mergeable quantile sketch with bounded relative error (the DDSketch idea: logarithmic bins,
 * so a bin's width is proportional to its value). Memory grows with the spread of values, not
 * their number: with 2 % error, 1 ms to 10 min spans ~330 bins at most. Pure.
 */

export class QuantileSketch {
  readonly relativeError: number;
  readonly #gamma: number;
  readonly #logGamma: number;
  readonly #minValue: number;
  /** Bin index → count; values at or below `minValue` (including 0) go to `#low`. */
  readonly #bins = new Map<number, number>();
  /** Bin indexes in ascending order; dropped when a bin is created (the page asks every second). */
  #sorted?: number[];
  #low = 0;
  #count = 0;
  #min = Number.POSITIVE_INFINITY;
  #max = Number.NEGATIVE_INFINITY;

  /** `relativeError` in (0, 1); values below `minValue` are reported as the smallest seen. */
  constructor(relativeError = 0.02, minValue = 1e-6) {
    if (!(relativeError > 0 && relativeError < 1)) {
      throw new RangeError(`relativeError must be in (0, 1), got ${relativeError}`);
    }
    this.relativeError = relativeError;
    this.#gamma = (1 + relativeError) / (1 - relativeError);
    this.#logGamma = Math.log(this.#gamma);
    this.#minValue = minValue;
  }

  get count(): number {
    return this.#count;
  }

  /** Adds a non-negative finite value (others are ignored). */
  add(value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    this.#count++;
    if (value < this.#min) this.#min = value;
    if (value > this.#max) this.#max = value;
    if (value <= this.#minValue) {
      this.#low++;
      return;
    }
    const index = Math.ceil(Math.log(value) / this.#logGamma);
    const count = this.#bins.get(index);
    if (count === undefined) this.#sorted = undefined;
    this.#bins.set(index, (count ?? 0) + 1);
  }

  /** Adds every value of `other` (built with the same relative error). */
  merge(other: QuantileSketch): void {
    if (other.relativeError !== this.relativeError) {
      throw new RangeError("cannot merge sketches with different relative errors");
    }
    for (const [index, count] of other.#bins) {
      const mine = this.#bins.get(index);
      if (mine === undefined) this.#sorted = undefined;
      this.#bins.set(index, (mine ?? 0) + count);
    }
    this.#low += other.#low;
    this.#count += other.#count;
    this.#min = Math.min(this.#min, other.#min);
    this.#max = Math.max(this.#max, other.#max);
  }

  /**
   * The nearest-rank q-quantile (the ⌈q·n⌉-th smallest value) within the relative error, clamped
   * to the exact minimum and maximum seen. Undefined when empty.
   */
  quantile(q: number): number | undefined {
    if (this.#count === 0) return undefined;
    const rank = Math.min(this.#count, Math.max(1, Math.ceil(q * this.#count)));
    let seen = this.#low;
    if (rank <= seen) return this.#min;
    this.#sorted ??= [...this.#bins.keys()].sort((a, b) => a - b);
    for (const index of this.#sorted) {
      seen += this.#bins.get(index)!;
      if (seen >= rank) {
        const estimate = 2 * this.#gamma ** index / (this.#gamma + 1);
        return Math.min(this.#max, Math.max(this.#min, estimate));
      }
    }
    return this.#max;
  }
}
