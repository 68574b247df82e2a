import type { ExtraKeys, HashAlgorithm } from "./types.ts";

/** Every chain algorithm of docs/compat.md §2. */
export const HASH_ALGORITHMS = [
  "sha256_cbor",
  "sha256",
  "xxhash",
  "xxhash_cbor",
  "sha256_hex",
  "xxh64_cumulative",
] as const satisfies readonly HashAlgorithm[];

/** What a chain needs: the algorithm, its root seed and how tokens are cut into chunks. */
export interface ChainOptions {
  hash: HashAlgorithm;
  /** PYTHONHASHSEED / GO_HASH_SEED of the engines; unset or empty means "0". */
  seed?: string;
  chunkSize: number;
  saveUnfullChunk?: boolean;
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

/**
 * The seed vLLM hashes for the root (`NONE_HASH = hash_fn(PYTHONHASHSEED)`). Llumnix's
 * GO_HASH_SEED rule applies: unset or empty means "0". vLLM with PYTHONHASHSEED unset draws a
 * random root nobody can match, so the router's seed must equal the engines' PYTHONHASHSEED.
 */
export function effectiveSeed(seed: string | undefined): string {
  return seed === undefined || seed === "" ? "0" : seed;
}

/** Problems with chain options, one sentence each (empty when valid). */
export function chainOptionProblems(options: Partial<ChainOptions>): string[] {
  const problems: string[] = [];
  const { hash, seed, chunkSize, saveUnfullChunk } = options;
  if (!HASH_ALGORITHMS.includes(hash as HashAlgorithm)) {
    problems.push(
      `Unknown hash ${JSON.stringify(hash)}: use one of ${HASH_ALGORITHMS.join(", ")}`,
    );
  }
  if (seed !== undefined && typeof seed !== "string") {
    problems.push(`seed must be a string (the engines' PYTHONHASHSEED), got ${typeof seed}`);
  }
  if (typeof chunkSize !== "number" || !Number.isInteger(chunkSize) || chunkSize < 1) {
    problems.push(
      `chunkSize must be an integer >= 1 (the engine's block/page/chunk size), got ${chunkSize}`,
    );
  }
  if (saveUnfullChunk !== undefined && typeof saveUnfullChunk !== "boolean") {
    problems.push(`saveUnfullChunk must be true or false, got ${JSON.stringify(saveUnfullChunk)}`);
  }
  return problems;
}
