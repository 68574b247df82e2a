/**
 * A token bucket: `ratePerS` refilled continuously up to `capacity`. A cost larger than the
 * capacity passes once the bucket is full (and leaves it in debt), so no request is refused
 * forever for its size alone. Pure: the caller passes the time.
 */
export class TokenBucket {
  #level: number;
  #updatedAtMs: number;

  constructor(
    readonly ratePerS: number,
    readonly capacity: number,
    nowMs: number,
  ) {
    this.#level = capacity;
    this.#updatedAtMs = nowMs;
  }

  /** Tokens available at `nowMs` (negative while in debt). */
  level(nowMs: number): number {
    this.#refill(nowMs);
    return this.#level;
  }

  /** Takes `cost` when affordable; false (and nothing taken) otherwise. */
  take(cost: number, nowMs: number): boolean {
    this.#refill(nowMs);
    if (this.#level < Math.min(cost, this.capacity)) return false;
    this.#level -= cost;
    return true;
  }

  /** Seconds until `cost` becomes affordable (0 when it is now). */
  waitS(cost: number, nowMs: number): number {
    const missing = Math.min(cost, this.capacity) - this.level(nowMs);
    return missing <= 0 ? 0 : missing / this.ratePerS;
  }

  #refill(nowMs: number): void {
    const elapsedS = Math.max(0, nowMs - this.#updatedAtMs) / 1000;
    this.#level = Math.min(this.capacity, this.#level + elapsedS * this.ratePerS);
    this.#updatedAtMs = nowMs;
  }
}
