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
  /**
   * The LoRA adapter's path as the engine was given it (`--lora-modules name=path`,
   * `/v1/load_lora_adapter`'s `lora_path`): hashed with the name in the "tagged" style.
   */
  loraPath?: string;
  /** `cache_salt`: part of the first block's hash only. */
  cacheSalt?: string;
}

/**
 * How vLLM lays out `extra_keys`: "tagged" (vLLM >= 0.31.0) hashes `("lora", name, path)` and
 * `("cache_salt", salt)` tuples; "plain" (vLLM <= 0.30) hashes the bare name and salt strings.
 */
export type ExtraKeyStyle = "tagged" | "plain";

/** A vLLM KV-cache group's kind: how many TP ranks hold the same bytes (docs/compat.md §3). */
export type KvGroupKind = "attention" | "mla" | "mamba";

export interface KeySchemeOptions {
  hash: HashAlgorithm;
  /**
   * The engines' PYTHONHASHSEED (vLLM) / GO_HASH_SEED (Llumnix), hashed exactly as given (with
   * `keyFormat: "llumnix"` an empty seed means "0"). Omitted: the engine's own default
   * (docs/compat.md §2). Ignored by the unseeded chains.
   */
  seed?: string;
  chunkSize: number;
  /** vLLM `hash_block_size` (hybrid models): hash per this many tokens; divides chunkSize. */
  hashBlockSize?: number;
  saveUnfullChunk?: boolean;
  /**
   * vLLM's `extra_keys` layout (LoRA, cache_salt). Default "tagged", what vLLM >= 0.31.0 hashes;
   * "plain" for vLLM 0.30 and older. Only vLLM's four chains have extra keys.
   */
  extraKeys?: ExtraKeyStyle;
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
  /** vLLM store: total KV heads; with tpSize > numKvHeads ranks share keys (GQA replication). */
  numKvHeads?: number;
  /** vLLM store: decode-context-parallel size (dcp_rank = tp_rank % dcpSize). */
  dcpSize?: number;
  /** vLLM store: prefill-context-parallel size. */
  pcpSize?: number;
  /** vLLM store: KV-cache groups, a count or each group's kind; every group's key must exist. */
  groups?: number | readonly KvGroupKind[];
  /** SGLang HiCache: tp_lcm_size; when > tpSize each rank writes the keys of tpLcmSize/tpSize ranks. */
  tpLcmSize?: number;
  /** LMCache `lmcache.tag.*` request configs, written as `@name%value` in this order. */
  lmcacheTags?: Readonly<Record<string, string>>;
  /** Count a chunk only when every rank's (and `_k`/`_v`) key exists. Default: rank 0 only. */
  requireAllRanks?: boolean;
}

/**
 * Where the scheme's seed came from: `given` (options.seed, as given or Llumnix's "" → "0"),
 * `engine-default` (seed omitted: the preset's engine default), `unseeded` (the chain has none).
 */
export type SeedSource = "given" | "engine-default" | "unseeded";

export interface KeyScheme {
  /** The options with the defaults applied; `seed` is the seed in use (undefined when unseeded). */
  readonly options: Readonly<KeySchemeOptions>;
  readonly seedSource: SeedSource;
  /** Chain hash of each chunk, lowercase hex (decimal for xxh64_cumulative). */
  blockHashes(tokens: ArrayLike<number>, extra?: ExtraKeys): string[];
  /** The primary store key of each chunk (rank 0). */
  keys(tokens: ArrayLike<number>, extra?: ExtraKeys): string[];
  /**
   * Every key that must exist for each chunk to count as cached: `[primary]` by default,
   * all ranks (and `_k`/`_v`) with `requireAllRanks`. `result[i][0]` is `keys()[i]`.
   */
  chunkKeys(tokens: ArrayLike<number>, extra?: ExtraKeys): string[][];
  /** `blockHashes` and `chunkKeys` from one pass of the chain. */
  hashed(tokens: ArrayLike<number>, extra?: ExtraKeys): HashedPrompt;
}

export interface HashedPrompt {
  blockHashes: string[];
  chunkKeys: string[][];
}
