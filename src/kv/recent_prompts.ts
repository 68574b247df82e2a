/**
 * The token lists of the last prompts a model's requests were dispatched with, newest first, for
 * `POST /admin/kv/detect {"recent": n}`. A small ring: `capacity` prompts of at most
 * `maxTokens` tokens each (longer ones keep their head, which is all detection reads).
 */
export class RecentPrompts {
  readonly #capacity: number;
  readonly #maxTokens: number;
  readonly #ring: (readonly number[])[] = [];
  #next = 0;

  constructor(options: { capacity?: number; maxTokens?: number } = {}) {
    this.#capacity = Math.max(1, options.capacity ?? 16);
    this.#maxTokens = Math.max(1, options.maxTokens ?? 8192);
  }

  /** Keeps `tokens` itself (never mutated after dispatch); only a longer list is cut (copied). */
  add(tokens: readonly number[]): void {
    const kept = tokens.length > this.#maxTokens ? tokens.slice(0, this.#maxTokens) : tokens;
    if (this.#ring.length < this.#capacity) this.#ring.push(kept);
    else this.#ring[this.#next] = kept;
    this.#next = (this.#next + 1) % this.#capacity;
  }

  /** Up to `n` prompts, newest first. */
  latest(n: number): (readonly number[])[] {
    const out: (readonly number[])[] = [];
    for (let i = 1; i <= Math.min(n, this.#ring.length); i++) {
      out.push(this.#ring[(this.#next - i + this.#capacity) % this.#capacity]);
    }
    return out;
  }

  get size(): number {
    return this.#ring.length;
  }
}
