import { bytesToHex } from "./hex.ts";

/**
 * Block digests a chain has already computed, by parent digest and block tokens: a conversation
 * that grows by a turn, or a document asked about again, costs only its new blocks. A block
 * without extra keys hashes `(parent, tokens)` alone, so a hit is exact: its parent and tokens are
 * compared, not hashed.
 *
 * Two generations bound it: when the newer fills, the older is dropped whole and the newer takes
 * its place, so a hit costs no reordering; a hit in the older generation is carried into the
 * newer one. A generation is a hash table in typed arrays, reused when it is dropped: remembering
 * a block allocates nothing, so a new prompt pays little for being remembered
 * (tests/bench/hash_bench.ts times it against the chain without a memo).
 */
export class ChainMemo {
  #current: Generation;
  #previous: Generation;
  readonly #carried: Uint8Array;

  /**
   * `maxTokens`: the most block tokens held, both generations together; `blockTokens`: the
   * chain's block size, which sizes the tables (a shorter block takes a whole entry);
   * `digestBytes`: the chain's digest length.
   */
  constructor(readonly maxTokens: number, blockTokens: number, digestBytes: number) {
    const tokens = Math.floor(maxTokens / 2);
    const blocks = Math.max(1, Math.ceil(tokens / Math.max(1, blockTokens)));
    this.#current = new Generation(tokens, blocks, digestBytes);
    this.#previous = new Generation(tokens, blocks, digestBytes);
    this.#carried = new Uint8Array(digestBytes);
  }

  /**
   * If block `tokens[start, end)` under the digest `parent` was remembered: writes its digest
   * into `digestOut` (which may be `parent` itself) and returns it as lowercase hex.
   */
  find(
    parent: Uint8Array,
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    digestOut: Uint8Array,
  ): string | undefined {
    const key = keyOf(parent, tokens, start, end);
    const current = this.#current.find(key, parent, tokens, start, end);
    if (current >= 0) {
      this.#current.digestInto(current, digestOut);
      return bytesToHex(digestOut);
    }
    const older = this.#previous.find(key, parent, tokens, start, end);
    if (older < 0) return undefined;
    this.#previous.digestInto(older, this.#carried); // `digestOut` may be `parent`, needed below
    this.remember(parent, tokens, start, end, this.#carried);
    digestOut.set(this.#carried);
    return bytesToHex(digestOut);
  }

  /**
   * Remembers a block's digest. A block with a token outside uint32 is not kept (the engines'
   * ids never are; the copy could not hold it).
   */
  remember(
    parent: Uint8Array,
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    digest: Uint8Array,
  ): void {
    if (end - start > this.#current.capacity) return;
    if (!this.#current.fits(end - start)) {
      const dropped = this.#previous;
      this.#previous = this.#current;
      this.#current = dropped;
      dropped.clear();
    }
    this.#current.add(keyOf(parent, tokens, start, end), parent, tokens, start, end, digest);
  }

  /** Tokens held, both generations together. */
  get size(): number {
    return this.#current.tokens + this.#previous.tokens;
  }
}

/** A 32-bit key of (parent, first token, length). */
function keyOf(parent: Uint8Array, tokens: ArrayLike<number>, start: number, end: number): number {
  const head = (parent[0] << 24) | (parent[1] << 16) | (parent[2] << 8) | parent[3];
  return head ^ Math.imul(tokens[start] | 0, 0x9e3779b1) ^ Math.imul(end - start, 0x85ebca6b);
}

/** One generation: an open hash table of blocks (chained per bucket), in typed arrays. */
class Generation {
  // Allocated at the first block (a chain that hashes one prompt needs no table); the tokens'
  // array grows as it fills.
  #ids = new Uint32Array(0);
  #buckets = new Int32Array(1).fill(-1);
  #next = new Int32Array(0);
  #key = new Int32Array(0);
  #at = new Int32Array(0);
  #length = new Int32Array(0);
  /** Per block: its parent's digest, then its own. */
  #digests = new Uint8Array(0);
  #blocks = 0;
  tokens = 0;

  constructor(
    readonly capacity: number,
    readonly maxBlocks: number,
    readonly digestBytes: number,
  ) {}

  fits(n: number): boolean {
    return this.tokens + n <= this.capacity && this.#blocks < this.maxBlocks;
  }

  /** The block's index, or -1. */
  find(
    key: number,
    parent: Uint8Array,
    tokens: ArrayLike<number>,
    start: number,
    end: number,
  ): number {
    const n = end - start;
    const ids = this.#ids;
    for (let b = this.#buckets[key & (this.#buckets.length - 1)]; b >= 0; b = this.#next[b]) {
      if (this.#key[b] !== key || this.#length[b] !== n || !this.#parentIs(b, parent)) continue;
      const at = this.#at[b];
      let i = 0;
      while (i < n && ids[at + i] === tokens[start + i]) i++;
      if (i === n) return b;
    }
    return -1;
  }

  digestInto(block: number, out: Uint8Array): void {
    const d = this.#digests;
    const from = (2 * block + 1) * this.digestBytes;
    for (let i = 0; i < this.digestBytes; i++) out[i] = d[from + i];
  }

  /** Adds a block; the caller has checked that it `fits`. */
  add(
    key: number,
    parent: Uint8Array,
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    digest: Uint8Array,
  ): void {
    const n = end - start;
    if (this.#next.length === 0) this.#allocate();
    if (this.tokens + n > this.#ids.length) this.#grow(this.tokens + n);
    const at = this.tokens;
    const ids = this.#ids;
    for (let i = 0; i < n; i++) {
      const t = tokens[start + i];
      if ((t >>> 0) !== t) return;
      ids[at + i] = t;
    }
    const b = this.#blocks++;
    const bucket = key & (this.#buckets.length - 1);
    this.#next[b] = this.#buckets[bucket];
    this.#buckets[bucket] = b;
    this.#key[b] = key;
    this.#at[b] = at;
    this.#length[b] = n;
    const d = this.#digests;
    const from = 2 * b * this.digestBytes;
    for (let i = 0; i < this.digestBytes; i++) {
      d[from + i] = parent[i];
      d[from + this.digestBytes + i] = digest[i];
    }
    this.tokens += n;
  }

  /** Forgets every block; the arrays are kept for the next generation. */
  clear(): void {
    this.#buckets.fill(-1);
    this.#blocks = 0;
    this.tokens = 0;
  }

  #parentIs(block: number, parent: Uint8Array): boolean {
    const d = this.#digests;
    const from = 2 * block * this.digestBytes;
    for (let i = 0; i < this.digestBytes; i++) if (d[from + i] !== parent[i]) return false;
    return true;
  }

  #allocate(): void {
    const blocks = this.maxBlocks;
    this.#buckets = new Int32Array(2 ** Math.ceil(Math.log2(blocks * 2))).fill(-1);
    this.#next = new Int32Array(blocks);
    this.#key = new Int32Array(blocks);
    this.#at = new Int32Array(blocks);
    this.#length = new Int32Array(blocks);
    this.#digests = new Uint8Array(2 * blocks * this.digestBytes);
  }

  #grow(need: number): void {
    const size = Math.min(this.capacity, Math.max(16 * 1024, this.#ids.length * 2));
    const bigger = new Uint32Array(Math.max(need, size));
    bigger.set(this.#ids.subarray(0, this.tokens));
    this.#ids = bigger;
  }
}
