import type { ChainHasher } from "./chain_hasher.ts";

/**
 * vLLM's `hash_block_size` smaller than the block size (hybrid models, docs/compat.md §2): the
 * chain runs per hash block and each block is keyed by its last hash block's hash. `inner`
 * hashes full hash blocks only, so every `ratio`-th of its hashes ends a full block.
 */
export function lastHashOfEachBlock(inner: ChainHasher, ratio: number): ChainHasher {
  if (ratio === 1) return inner;
  const pick = <T>(all: T[]): T[] => {
    const out: T[] = [];
    for (let i = ratio - 1; i < all.length; i += ratio) out.push(all[i]);
    return out;
  };
  return {
    hash: inner.hash,
    digests: (tokens, extra) => pick(inner.digests(tokens, extra)),
    strings: (tokens, extra) => pick(inner.strings(tokens, extra)),
  };
}
