/** Chain hash algorithms of docs/compat.md §2, by the name engines use for them. */
export type HashAlgorithm =
  | "sha256_cbor"
  | "sha256"
  | "xxhash"
  | "xxhash_cbor"
  | "sha256_hex"
  | "xxh64_cumulative";

/** Store key layouts of docs/compat.md §3; any other string is a custom template. */
export type KeyFormatPreset = "llumnix" | "vllm-mooncake-store" | "lmcache" | "sglang-hicache";

/** vLLM `extra_keys` a request can carry (docs/compat.md §2, last paragraph). */
export interface ExtraKeys {
  /** LoRA adapter name: part of every block's hash. */
  loraName?: string;
  /** `cache_salt`: part of the first block's hash only. */
  cacheSalt?: string;
}

export interface KeySchemeOptions {
  hash: HashAlgorithm;
  /** The engines' PYTHONHASHSEED / GO_HASH_SEED; ignored by the unseeded chains. */
  seed?: string;
  chunkSize: number;
  saveUnfullChunk?: boolean;
  /** A preset name, or a custom template with `{hex}`, `{model}`, `{tp_rank}` ... placeholders. */
  keyFormat: KeyFormatPreset | string;
  model?: string;
  tpRank?: number;
  ppRank?: number;
  tpSize?: number;
  ppSize?: number;
  worldSize?: number;
  workerId?: number;
  dtype?: string;
  tag?: string;
  cachePrefix?: string;
  group?: number;
  mla?: boolean;
  /** Count a chunk only when every rank's (and `_k`/`_v`) key exists. Default: rank 0 only. */
  requireAllRanks?: boolean;
}

export interface KeyScheme {
  readonly options: Readonly<KeySchemeOptions>;
  /** Chain hash of each chunk, lowercase hex (decimal for xxh64_cumulative). */
  blockHashes(tokens: ArrayLike<number>, extra?: ExtraKeys): string[];
  /** The primary store key of each chunk (rank 0). */
  keys(tokens: ArrayLike<number>, extra?: ExtraKeys): string[];
  /**
   * Every key that must exist for each chunk to count as cached: `[primary]` by default,
   * all ranks (and `_k`/`_v`) with `requireAllRanks`. `result[i][0]` is `keys()[i]`.
   */
  chunkKeys(tokens: ArrayLike<number>, extra?: ExtraKeys): string[][];
}
