/**
 * Token ids per pre-tokenized piece (a word with its leading space, a digit, a run of spaces...).
 * Text in one language keeps reusing a few thousand pieces, so even a conversation never seen
 * before is mostly pieces seen before, and looking them up skips the BPE merge loop, where
 * tokenizing time goes. One cache per tokenizer: ids are only valid for one vocabulary.
 *
 * Bounded by entries and by piece length (long pieces are rare and would make the keys costly).
 * Two generations approximate LRU at O(1): new pieces go to the young Map; when it holds half the
 * budget it becomes the old one and the previous old Map is dropped; a hit in the old Map moves the
 * piece to the young one. (Evicting a Map's first key one by one is not O(1) in V8: iterating
 * skips the deleted slots, 26 µs an eviction at 64k entries.)
 */

/** A piece's ids: one id as a number (most pieces), several as an array. */
export type PieceIds = number | Uint32Array;

export interface PieceCacheOptions {
  /** Upper bound on the pieces held. */
  maxEntries: number;
  /** Longer pieces are neither looked up nor stored. */
  maxPieceChars: number;
}

export interface PieceCacheStats {
  hits: number;
  misses: number;
  /** Pieces too long to be cached. */
  bypassed: number;
  evictions: number;
  entries: number;
  maxEntries: number;
  maxPieceChars: number;
}

export const DEFAULT_PIECE_CACHE_ENTRIES = 65_536;
export const DEFAULT_PIECE_MAX_CHARS = 32;

export class PieceCache {
  readonly maxEntries: number;
  readonly maxPieceChars: number;
  readonly #generationSize: number;
  #young = new Map<string, PieceIds>();
  #old = new Map<string, PieceIds>();
  #hits = 0;
  #misses = 0;
  #bypassed = 0;
  #evictions = 0;

  constructor(options: PieceCacheOptions) {
    if (!(options.maxEntries >= 2)) throw new RangeError("maxEntries must be a number ≥ 2");
    this.maxEntries = options.maxEntries;
    this.maxPieceChars = options.maxPieceChars;
    this.#generationSize = Math.max(1, Math.floor(options.maxEntries / 2));
  }

  /** Whether a piece is short enough to be cached. */
  accepts(piece: string): boolean {
    return piece.length <= this.maxPieceChars;
  }

  get(piece: string): PieceIds | undefined {
    if (!this.accepts(piece)) {
      this.#bypassed++;
      return undefined;
    }
    let ids = this.#young.get(piece);
    if (ids === undefined) {
      ids = this.#old.get(piece);
      if (ids === undefined) {
        this.#misses++;
        return undefined;
      }
      this.#old.delete(piece);
      this.#store(piece, ids);
    }
    this.#hits++;
    return ids;
  }

  set(piece: string, ids: Uint32Array): void {
    if (this.accepts(piece)) this.#store(piece, ids.length === 1 ? ids[0] : ids);
  }

  stats(): PieceCacheStats {
    return {
      hits: this.#hits,
      misses: this.#misses,
      bypassed: this.#bypassed,
      evictions: this.#evictions,
      entries: this.#young.size + this.#old.size,
      maxEntries: this.maxEntries,
      maxPieceChars: this.maxPieceChars,
    };
  }

  #store(piece: string, ids: PieceIds): void {
    if (this.#young.size >= this.#generationSize) {
      this.#evictions += this.#old.size;
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(piece, ids);
  }
}
