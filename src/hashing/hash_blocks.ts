import {
  type ChainHasher,
  chainOptionProblems,
  type ChainOptions,
  DEFAULT_EXTRA_KEY_STYLE,
} from "./chain_hasher.ts";
import { hasExtra } from "./extra_tuple.ts";
import { lastHashOfEachBlock } from "./hash_block_chain.ts";
import { createSha256HexChain } from "./sha256_hex_chain.ts";
import type { ExtraKeys } from "./types.ts";
import { createVllmChain } from "./vllm_chain.ts";
import { createXxh64CumulativeChain } from "./xxh64_cumulative_chain.ts";

/**
 * A reusable chain for `options` (root computed once, buffers reused). Throws one error listing
 * every invalid option.
 */
export function createChainHasher(options: ChainOptions): ChainHasher {
  const problems = chainOptionProblems(options);
  if (problems.length > 0) throw new Error(`Invalid chain options:\n- ${problems.join("\n- ")}`);
  const { hash, seed, chunkSize } = options;
  const unfull = options.saveUnfullChunk ?? false;
  switch (hash) {
    case "sha256_cbor":
    case "sha256":
    case "xxhash":
    case "xxhash_cbor": {
      const hashBlockSize = options.hashBlockSize ?? chunkSize;
      const style = options.extraKeys ?? DEFAULT_EXTRA_KEY_STYLE;
      const chain = createVllmChain(hash, seed, hashBlockSize, unfull, style);
      return lastHashOfEachBlock(chain, chunkSize / hashBlockSize);
    }
    case "sha256_hex":
      return rejectExtra(createSha256HexChain(chunkSize, unfull));
    case "xxh64_cumulative":
      return rejectExtra(createXxh64CumulativeChain(chunkSize, unfull));
  }
}

/**
 * Raw digest of each chunk of `tokens` (one Uint8Array per chunk). For repeated use build the
 * chain once with `createChainHasher` (or `createKeyScheme`) instead.
 */
export function hashBlocks(
  tokens: ArrayLike<number>,
  options: ChainOptions,
  extra?: ExtraKeys,
): Uint8Array[] {
  return createChainHasher(options).digests(tokens, extra);
}

/** SGLang's and Llumnix v6d's chains have no place for LoRA / cache_salt: refuse, not ignore. */
function rejectExtra(chain: ChainHasher): ChainHasher {
  const check = (extra: ExtraKeys | undefined) => {
    if (hasExtra(extra)) {
      throw new Error(
        `Hash "${chain.hash}" has no extra keys (LoRA / cache_salt are part of vLLM's ` +
          `chains only): drop them for this engine or use a vLLM hash`,
      );
    }
  };
  return {
    hash: chain.hash,
    digests(tokens, extra) {
      check(extra);
      return chain.digests(tokens);
    },
    strings(tokens, extra) {
      check(extra);
      return chain.strings(tokens);
    },
  };
}
