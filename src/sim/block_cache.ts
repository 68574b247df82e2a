/**
 * One instance's KV cache in blocks, least recently used evicted first. A JS Map keeps
 * insertion order, so re-inserting on use makes its first key the LRU victim.
 */
export class BlockCache {
  readonly capacity: number;
  readonly #blocks = new Map<number, true>();
  #evictions = 0;

  constructor(capacityBlocks: number) {
    if (!(capacityBlocks >= 1)) {
      throw new Error(`KV cache capacity must be at least one block (got ${capacityBlocks}).`);
    }
    this.capacity = Math.floor(capacityBlocks);
  }

  get size(): number {
    return this.#blocks.size;
  }

  get evictions(): number {
    return this.#evictions;
  }

  has(block: number): boolean {
    return this.#blocks.has(block);
  }

  /** Marks a block used now, adding it when absent; evicts the least recently used overflow. */
  insert(block: number): void {
    this.#blocks.delete(block);
    this.#blocks.set(block, true);
    while (this.#blocks.size > this.capacity) {
      this.#blocks.delete(this.#blocks.keys().next().value!);
      this.#evictions++;
    }
  }

  /** Consecutive blocks of `blocks` held, counted from the first. */
  prefixLength(blocks: readonly number[]): number {
    let n = 0;
    while (n < blocks.length && this.#blocks.has(blocks[n])) n++;
    return n;
  }
}
