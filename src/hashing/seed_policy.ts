import type { HashAlgorithm, SeedSource } from "./types.ts";

/** vLLM's root seed for sha256 / sha256_cbor when PYTHONHASHSEED is unset (docs/compat.md §2). */
export const VLLM_DEFAULT_SEED = "vllm-none-hash";
/** Llumnix's GO_HASH_SEED default; an empty GO_HASH_SEED also means this (docs/compat.md §2). */
export const LLUMNIX_DEFAULT_SEED = "0";

/** The seed a chain roots at, where it came from, or why no default can match the engines. */
export interface ResolvedSeed {
  seed: string | undefined;
  source: SeedSource;
  problem?: string;
}

/** True for the chains whose root is the hash of a seed (vLLM's `NONE_HASH`). */
export function isSeededHash(hash: HashAlgorithm): boolean {
  return hash === "sha256_cbor" || hash === "sha256" || hash === "xxhash" ||
    hash === "xxhash_cbor";
}

/**
 * The seed to hash for the root (docs/compat.md §2). Given: hashed exactly as given, except that
 * Llumnix reads an empty GO_HASH_SEED as "0". Omitted: the engine's default, Llumnix's "0" or
 * vLLM's "vllm-none-hash" for sha256 / sha256_cbor; vLLM's xxhash chains then root at a random
 * per-process value, so there is no default and `problem` says what to set.
 */
export function resolveSeed(
  hash: HashAlgorithm,
  seed: string | undefined,
  keyFormat: string | undefined,
): ResolvedSeed {
  if (!isSeededHash(hash)) return { seed: undefined, source: "unseeded" };
  const llumnix = keyFormat === "llumnix";
  if (seed !== undefined) {
    return { seed: llumnix && seed === "" ? LLUMNIX_DEFAULT_SEED : seed, source: "given" };
  }
  if (llumnix) return { seed: LLUMNIX_DEFAULT_SEED, source: "engine-default" };
  if (hash === "sha256" || hash === "sha256_cbor") {
    return { seed: VLLM_DEFAULT_SEED, source: "engine-default" };
  }
  return {
    seed: undefined,
    source: "engine-default",
    problem: `seed is required with hash "${hash}": vLLM roots xxhash chains at a random ` +
      `per-process seed when PYTHONHASHSEED is unset, which no router can match. Start every ` +
      `engine with the same PYTHONHASHSEED and set seed to it (or use sha256 / sha256_cbor, ` +
      `whose unset default "${VLLM_DEFAULT_SEED}" is used when seed is omitted)`,
  };
}

/** One line for the start-up log: the seed in use and why (docs/compat.md §2). */
export function describeSeed(
  scheme: { options: { hash: HashAlgorithm; seed?: string }; seedSource: SeedSource },
): string {
  const { hash, seed } = scheme.options;
  if (scheme.seedSource === "unseeded") return `hash ${hash} has no seed`;
  const why = scheme.seedSource === "given"
    ? "from the config"
    : "seed omitted: the engine default";
  return `hash ${hash} roots at seed ${JSON.stringify(seed)} (${why})`;
}
