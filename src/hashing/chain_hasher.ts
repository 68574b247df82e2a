import { resolveSeed } from "./seed_policy.ts";
import type { ExtraKeys, ExtraKeyStyle, HashAlgorithm } from "./types.ts";

/** Every chain algorithm of docs/compat.md §2. */
export const HASH_ALGORITHMS = [
  "sha256_cbor",
  "sha256",
  "xxhash",
  "xxhash_cbor",
  "sha256_hex",
  "xxh64_cumulative",
] as const satisfies readonly HashAlgorithm[];

/** vLLM's `extra_keys` layouts; "tagged" (vLLM >= 0.31.0) is the default. */
export const EXTRA_KEY_STYLES = ["tagged", "plain"] as const satisfies readonly ExtraKeyStyle[];
export const DEFAULT_EXTRA_KEY_STYLE: ExtraKeyStyle = "tagged";

/** What a chain needs: the algorithm, its root seed and how tokens are cut into chunks. */
export interface ChainOptions {
  hash: HashAlgorithm;
  /**
   * The seed hashed for the root, exactly as given. Omitted: vLLM's default for sha256 /
   * sha256_cbor ("vllm-none-hash"); xxhash / xxhash_cbor need one (docs/compat.md §2).
   */
  seed?: string;
  chunkSize: number;
  /** vLLM `hash_block_size`: the chain runs per this many tokens (docs/compat.md §2). */
  hashBlockSize?: number;
  saveUnfullChunk?: boolean;
  /** vLLM's `extra_keys` layout (default "tagged"); the other chains have no extra keys. */
  extraKeys?: ExtraKeyStyle;
}

/** A chain of docs/compat.md §2 with its root computed once; reuses its buffers across calls. */
export interface ChainHasher {
  readonly hash: HashAlgorithm;
  /** Raw digest of each hashed chunk (32 bytes for SHA-256, 16 for XXH3-128, 8 for XXH64). */
  digests(tokens: ArrayLike<number>, extra?: ExtraKeys): Uint8Array[];
  /** Each chunk's digest as written in store keys: lowercase hex, decimal for xxh64_cumulative. */
  strings(tokens: ArrayLike<number>, extra?: ExtraKeys): string[];
}

/** Number of chunks hashed for `length` tokens. */
export function chunkCount(length: number, chunkSize: number, saveUnfullChunk: boolean): number {
  return saveUnfullChunk ? Math.ceil(length / chunkSize) : Math.floor(length / chunkSize);
}

/** Problems with chain options, one sentence each (empty when valid). */
export function chainOptionProblems(options: Partial<ChainOptions>): string[] {
  const problems: string[] = [];
  const { hash, seed, chunkSize, saveUnfullChunk, hashBlockSize, extraKeys } = options;
  if (!HASH_ALGORITHMS.includes(hash as HashAlgorithm)) {
    problems.push(
      `Unknown hash ${JSON.stringify(hash)}: use one of ${HASH_ALGORITHMS.join(", ")}`,
    );
  }
  if (seed !== undefined && typeof seed !== "string") {
    problems.push(`seed must be a string (the engines' PYTHONHASHSEED), got ${typeof seed}`);
  } else if (HASH_ALGORITHMS.includes(hash as HashAlgorithm)) {
    const { problem } = resolveSeed(hash as HashAlgorithm, seed, undefined);
    if (problem !== undefined) problems.push(problem);
  }
  if (typeof chunkSize !== "number" || !Number.isInteger(chunkSize) || chunkSize < 1) {
    problems.push(
      `chunkSize must be an integer >= 1 (the engine's block/page/chunk size), got ${chunkSize}`,
    );
  }
  if (saveUnfullChunk !== undefined && typeof saveUnfullChunk !== "boolean") {
    problems.push(`saveUnfullChunk must be true or false, got ${JSON.stringify(saveUnfullChunk)}`);
  }
  if (hashBlockSize !== undefined) {
    problems.push(...hashBlockSizeProblems(hash, hashBlockSize, chunkSize, saveUnfullChunk));
  }
  if (extraKeys !== undefined && !EXTRA_KEY_STYLES.includes(extraKeys)) {
    problems.push(
      `extraKeys must be "tagged" (vLLM >= 0.31.0) or "plain" (older), got ${
        JSON.stringify(extraKeys)
      }`,
    );
  }
  return problems;
}

/** vLLM's `hash_block_size` must divide the block size, and only vLLM's chains have it. */
function hashBlockSizeProblems(
  hash: HashAlgorithm | undefined,
  hashBlockSize: unknown,
  chunkSize: unknown,
  saveUnfullChunk: unknown,
): string[] {
  if (typeof hashBlockSize !== "number" || !Number.isInteger(hashBlockSize) || hashBlockSize < 1) {
    return [`hashBlockSize must be an integer >= 1, got ${JSON.stringify(hashBlockSize)}`];
  }
  const problems: string[] = [];
  if (typeof chunkSize === "number" && chunkSize % hashBlockSize !== 0) {
    problems.push(
      `hashBlockSize (${hashBlockSize}) must divide chunkSize (${chunkSize}), as vLLM requires`,
    );
  }
  if (hash === "sha256_hex" || hash === "xxh64_cumulative") {
    problems.push(`hashBlockSize is vLLM's: hash "${hash}" has none, drop it`);
  }
  if (saveUnfullChunk === true && hashBlockSize !== chunkSize) {
    problems.push(
      "hashBlockSize smaller than chunkSize cannot go with saveUnfullChunk: vLLM keys full blocks only",
    );
  }
  return problems;
}
