/**
 * A bounded LRU of token ids per text segment (the text between two added tokens). Hugging Face
 * tokenizers split on added tokens before normalizing and pre-tokenizing, so a segment's ids never
 * depend on its neighbours: a conversation that grows by a turn finds every earlier segment here and
 * tokenizes only the new ones. Bounded by cached tokens, by cached characters (the keys) and by
 * entries: an entry costs ~400 bytes besides its ids (the entry, a Uint32Array and its buffer, the
 * key, a Map slot), so without the last bound a unique short message per request (a chat's new
 * question) would fill a 4M-token budget as ~400k entries, ~160 MB in one cache.
 *
 * One cache can serve several tokenizers: each takes its own `scope`, and all share the budget.
 */

export interface TokenSegmentCacheOptions {
  /** Upper bound on the ids held, all scopes together. */
  maxTokens: number;
  /** Upper bound on the characters of the segments held (the keys); default 8 × maxTokens. */
  maxChars?: number;
  /** Upper bound on the segments held; default one per 128 tokens of budget, at least 1024. */
  maxEntries?: number;
}

/**
 * Tokens of budget per entry of the default entry bound. An entry's overhead is ~100 ids' worth, so
 * at 128 the entries' overhead stays under the ids' own budget (4M tokens: 31,250 entries, ~12 MB).
 */
const TOKENS_PER_CACHE_ENTRY = 128;
const MIN_CACHE_ENTRIES = 1024;

export interface TokenSegmentCacheStats {
  hits: number;
  misses: number;
  /** Tokens served from the cache. */
  hitTokens: number;
  evictions: number;
  entries: number;
  tokens: number;
  chars: number;
  maxTokens: number;
  maxChars: number;
  maxEntries: number;
}

/** One tokenizer's view of a shared cache. */
export interface TokenSegmentCacheScope {
  get(segment: string): Uint32Array | undefined;
  set(segment: string, ids: Uint32Array): void;
}

interface Entry {
  key: string;
  ids: Uint32Array;
  map: Map<string, Entry>;
  prev: Entry | null;
  next: Entry | null;
}

export class TokenSegmentCache {
  readonly maxTokens: number;
  readonly maxChars: number;
  readonly maxEntries: number;
  readonly #scopes = new Map<string, Map<string, Entry>>();
  #head: Entry | null = null; // least recently used
  #tail: Entry | null = null;
  #tokens = 0;
  #chars = 0;
  #entries = 0;
  #hits = 0;
  #misses = 0;
  #hitTokens = 0;
  #evictions = 0;

  constructor(options: TokenSegmentCacheOptions) {
    if (!(options.maxTokens >= 0)) throw new RangeError("maxTokens must be a number ≥ 0");
    this.maxTokens = options.maxTokens;
    this.maxChars = options.maxChars ?? options.maxTokens * 8;
    this.maxEntries = options.maxEntries ??
      Math.max(MIN_CACHE_ENTRIES, Math.ceil(options.maxTokens / TOKENS_PER_CACHE_ENTRY));
  }

  scope(name: string): TokenSegmentCacheScope {
    let map = this.#scopes.get(name);
    if (!map) this.#scopes.set(name, map = new Map());
    const entries = map;
    return {
      get: (segment) => this.#get(entries, segment),
      set: (segment, ids) => this.#set(entries, segment, ids),
    };
  }

  stats(): TokenSegmentCacheStats {
    return {
      hits: this.#hits,
      misses: this.#misses,
      hitTokens: this.#hitTokens,
      evictions: this.#evictions,
      entries: this.#entries,
      tokens: this.#tokens,
      chars: this.#chars,
      maxTokens: this.maxTokens,
      maxChars: this.maxChars,
      maxEntries: this.maxEntries,
    };
  }

  clear(): void {
    for (const map of this.#scopes.values()) map.clear();
    this.#head = this.#tail = null;
    this.#tokens = this.#chars = this.#entries = 0;
  }

  #unlink(entry: Entry): void {
    if (entry.prev) entry.prev.next = entry.next;
    else this.#head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else this.#tail = entry.prev;
    entry.prev = entry.next = null;
  }

  #append(entry: Entry): void {
    entry.prev = this.#tail;
    entry.next = null;
    if (this.#tail) this.#tail.next = entry;
    else this.#head = entry;
    this.#tail = entry;
  }

  #get(map: Map<string, Entry>, segment: string): Uint32Array | undefined {
    const entry = map.get(segment);
    if (!entry) {
      this.#misses++;
      return undefined;
    }
    this.#hits++;
    this.#hitTokens += entry.ids.length;
    if (entry !== this.#tail) {
      this.#unlink(entry);
      this.#append(entry);
    }
    return entry.ids;
  }

  #set(map: Map<string, Entry>, segment: string, ids: Uint32Array): void {
    // An entry larger than the whole budget would only evict everything else.
    if (ids.length > this.maxTokens || segment.length > this.maxChars) return;
    const old = map.get(segment);
    if (old) this.#remove(old);
    const entry: Entry = { key: segment, ids, map, prev: null, next: null };
    map.set(segment, entry);
    this.#append(entry);
    this.#tokens += ids.length;
    this.#chars += segment.length;
    this.#entries++;
    while (
      (this.#tokens > this.maxTokens || this.#chars > this.maxChars ||
        this.#entries > this.maxEntries) && this.#head
    ) {
      this.#remove(this.#head);
      this.#evictions++;
    }
  }

  #remove(entry: Entry): void {
    this.#unlink(entry);
    entry.map.delete(entry.key);
    this.#tokens -= entry.ids.length;
    this.#chars -= entry.key.length;
    this.#entries--;
  }
}
