/**
 * The mean uncached prefill size of the requests dispatched recently: the last `capacity`
 * dispatches no older than `maxAgeMs`. Reconciliation uses it to turn an engine's waiting-request
 * count into tokens when the engine reports no token figure (vLLM). Pure: times are arguments.
 */
export interface RecentPrefillSizesOptions {
  /** Dispatches remembered (default 128). */
  capacity?: number;
  /** Older dispatches are forgotten (default 60 s). */
  maxAgeMs?: number;
  /** The mean when nothing recent is known (default 1024 tokens). */
  fallbackTokens?: number;
}

export class RecentPrefillSizes {
  readonly #tokens: Float64Array;
  readonly #at: Float64Array;
  readonly #maxAgeMs: number;
  readonly #fallback: number;
  #next = 0;
  #size = 0;

  constructor(options: RecentPrefillSizesOptions = {}) {
    const capacity = Math.max(1, Math.floor(options.capacity ?? 128));
    this.#tokens = new Float64Array(capacity);
    this.#at = new Float64Array(capacity);
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#fallback = options.fallbackTokens ?? 1024;
  }

  /** Records one dispatch of `uncachedTokens` at `atMs`. */
  record(uncachedTokens: number, atMs: number): void {
    this.#tokens[this.#next] = Math.max(0, uncachedTokens);
    this.#at[this.#next] = atMs;
    this.#next = (this.#next + 1) % this.#tokens.length;
    this.#size = Math.min(this.#size + 1, this.#tokens.length);
  }

  /** Mean uncached tokens of the dispatches younger than `maxAgeMs` at `nowMs`, else the fallback. */
  mean(nowMs: number): number {
    let sum = 0;
    let n = 0;
    for (let i = 0; i < this.#size; i++) {
      if (nowMs - this.#at[i] > this.#maxAgeMs) continue;
      sum += this.#tokens[i];
      n++;
    }
    return n > 0 ? sum / n : this.#fallback;
  }
}
