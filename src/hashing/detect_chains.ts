import { LLUMNIX_DEFAULT_SEED, VLLM_DEFAULT_SEED } from "./seed_policy.ts";
import { isSeededHash } from "./seed_policy.ts";
import type { HashAlgorithm, KeySchemeOptions } from "./types.ts";
import { type LayoutChoice, pruned } from "./detect_layouts.ts";

/** The chain half of a candidate scheme. */
export type ChainChoice = Pick<KeySchemeOptions, "hash" | "seed" | "chunkSize" | "hashBlockSize">;

/** Chunk sizes probed: 16 … 1024 (powers of two), and the configured one. */
const DETECT_CHUNK_SIZES = [16, 32, 64, 128, 256, 512, 1024];
const VLLM_HASHES: HashAlgorithm[] = ["sha256_cbor", "sha256", "xxhash", "xxhash_cbor"];
const ALL_HASHES: HashAlgorithm[] = [...VLLM_HASHES, "sha256_hex", "xxh64_cumulative"];
/** vLLM's attention block size: the usual `hash_block_size` of hybrid models. */
const USUAL_HASH_BLOCK = 16;

/**
 * Chains worth probing for prompts of up to `longest` tokens: every hash × seed (configured, "0",
 * "", "vllm-none-hash"; none for the unseeded chains) × chunk size × `hashBlockSize` (none, 16,
 * configured; vLLM chains only). Only chunk sizes with a full chunk in the longest prompt.
 */
export function chainCandidates(configured: KeySchemeOptions, longest: number): ChainChoice[] {
  const sizes = [...new Set([configured.chunkSize, ...DETECT_CHUNK_SIZES])]
    .filter((size) => size <= longest);
  const seeds = [...new Set([configured.seed, LLUMNIX_DEFAULT_SEED, "", VLLM_DEFAULT_SEED])]
    .filter((seed) => seed !== undefined);
  const hashes = [...new Set([configured.hash, ...ALL_HASHES])];
  const chains: ChainChoice[] = [];
  for (const chunkSize of sizes) {
    for (const hash of hashes) {
      const hashSeeds = isSeededHash(hash) ? seeds : [undefined];
      for (const seed of hashSeeds) {
        for (const hashBlockSize of hashBlockSizes(configured, hash, chunkSize)) {
          chains.push(pruned({ hash, seed, chunkSize, hashBlockSize }));
        }
      }
    }
  }
  return chains;
}

function hashBlockSizes(
  configured: KeySchemeOptions,
  hash: HashAlgorithm,
  chunkSize: number,
): (number | undefined)[] {
  if (!VLLM_HASHES.includes(hash)) return [undefined];
  return [...new Set([undefined, USUAL_HASH_BLOCK, configured.hashBlockSize])]
    .filter((size) => size === undefined || (size < chunkSize && chunkSize % size === 0));
}

/** Whether an engine writes keys of this layout with this chain (docs/compat.md §2-3). */
export function chainFitsLayout(chain: ChainChoice, layout: LayoutChoice): boolean {
  switch (layout.keyFormat) {
    case "llumnix":
      return chain.hashBlockSize === undefined;
    case "vllm-mooncake-store":
    case "lmcache":
      return VLLM_HASHES.includes(chain.hash) &&
        (chain.hashBlockSize === undefined || layout.keyFormat === "vllm-mooncake-store");
    case "sglang-hicache":
      return chain.hash === "sha256_hex";
    default:
      return chain.hashBlockSize === undefined; // a custom template: any chain
  }
}
