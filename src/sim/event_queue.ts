/** A binary min-heap of timed events; equal times pop in insertion order (deterministic). */
export class EventQueue<T> {
  #times: number[] = [];
  #seqs: number[] = [];
  #values: T[] = [];
  #seq = 0;

  get size(): number {
    return this.#values.length;
  }

  /** Time of the earliest event, or +Infinity when empty. */
  peekTime(): number {
    return this.#values.length === 0 ? Number.POSITIVE_INFINITY : this.#times[0];
  }

  push(time: number, value: T): void {
    this.#times.push(time);
    this.#seqs.push(this.#seq++);
    this.#values.push(value);
    this.#up(this.#values.length - 1);
  }

  pop(): { time: number; value: T } | undefined {
    const n = this.#values.length;
    if (n === 0) return undefined;
    const top = { time: this.#times[0], value: this.#values[0] };
    this.#move(n - 1, 0);
    this.#times.pop();
    this.#seqs.pop();
    this.#values.pop();
    if (this.#values.length > 0) this.#down(0);
    return top;
  }

  #less(a: number, b: number): boolean {
    return this.#times[a] < this.#times[b] ||
      (this.#times[a] === this.#times[b] && this.#seqs[a] < this.#seqs[b]);
  }

  #move(from: number, to: number): void {
    this.#times[to] = this.#times[from];
    this.#seqs[to] = this.#seqs[from];
    this.#values[to] = this.#values[from];
  }

  #swap(a: number, b: number): void {
    [this.#times[a], this.#times[b]] = [this.#times[b], this.#times[a]];
    [this.#seqs[a], this.#seqs[b]] = [this.#seqs[b], this.#seqs[a]];
    [this.#values[a], this.#values[b]] = [this.#values[b], this.#values[a]];
  }

  #up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const n = this.#values.length;
    for (;;) {
      const left = 2 * i + 1, right = left + 1;
      let smallest = i;
      if (left < n && this.#less(left, smallest)) smallest = left;
      if (right < n && this.#less(right, smallest)) smallest = right;
      if (smallest === i) return;
      this.#swap(i, smallest);
      i = smallest;
    }
  }
}
