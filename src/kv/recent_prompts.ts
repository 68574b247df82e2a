/**
 * The token lists of the last prompts a model's requests were dispatched with, newest first, for
 * `POST /admin/kv/detect {"recent": n}`. A small ring: `capacity` prompts of at most
 * `maxTokens` tokens each (longer ones keep their head, which is all detection reads).
 */
export class RecentPrompts {
  readonly #capacity: number;
  readonly #maxTokens: number;
  readonly #ring: number[][] = [];
  #next = 0;

  constructor(options: { capacity?: number; maxTokens?: number } = {}) {
    this.#capacity = Math.max(1, options.capacity ?? 16);
    this.#maxTokens = Math.max(1, options.maxTokens ?? 8192);
  }

  add(tokens: readonly number[]): void {
    const copy = tokens.slice(0, this.#maxTokens);
    if (this.#ring.length < this.#capacity) this.#ring.push(copy);
    else this.#ring[this.#next] = copy;
    this.#next = (this.#next + 1) % this.#capacity;
  }

  /** Up to `n` prompts, newest first. */
  latest(n: number): number[][] {
    const out: number[][] = [];
    for (let i = 1; i <= Math.min(n, this.#ring.length); i++) {
      out.push(this.#ring[(this.#next - i + this.#capacity) % this.#capacity]);
    }
    return out;
  }

  get size(): number {
    return this.#ring.length;
  }
}
