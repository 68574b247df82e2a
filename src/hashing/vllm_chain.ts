import { type ChainHasher, chunkCount } from "./chain_hasher.ts";
import { CborChainEncoder, cborText } from "./cbor_chain_encoder.ts";
import { ChainMemo } from "./chain_memo.ts";
import { type ExtraTuple, extraTuples } from "./extra_tuple.ts";
import { PickleChainEncoder } from "./pickle_chain_encoder.ts";
import { resolveSeed } from "./seed_policy.ts";
import { type BlockDigest, sha256Digest } from "./sha256_digest.ts";
import type { ExtraKeys, ExtraKeyStyle } from "./types.ts";
import { xxh3_128Digest } from "./xxhash_wasm.ts";

function digestOf(hash: VllmHashAlgorithm): BlockDigest {
  return hash.startsWith("sha256") ? sha256Digest : xxh3_128Digest;
}

/** Block tokens a chain remembers by default (chain_memo.ts): ~4 MB of ids, plus the entries. */
export const DEFAULT_MEMO_TOKENS = 1 << 20;

/** The chains vLLM's `--prefix-caching-hash-algo` offers (also LMCache and Llumnix's default). */
export type VllmHashAlgorithm = "sha256_cbor" | "sha256" | "xxhash" | "xxhash_cbor";

interface ChainEncoder {
  parent(): Uint8Array;
  encodeBlock(tokens: ArrayLike<number>, start: number, end: number, extra: ExtraTuple): Uint8Array;
}

/**
 * vLLM's `hash_block_tokens`: block i hashes `(parent, tuple(tokens), extra_keys)` serialized
 * as canonical CBOR or pickle protocol 5, where block 0's parent is `NONE_HASH`, the hash of
 * the seed string serialized the same way (an omitted seed is vLLM's default, docs/compat.md §2).
 * `extraKeys` is the layout of `extra_keys` (tagged from vLLM 0.31.0 on). Blocks without extra
 * keys are remembered in `memo` (chain_memo.ts) and not hashed again; `null` remembers nothing.
 */
export function createVllmChain(
  hash: VllmHashAlgorithm,
  seed: string | undefined,
  chunkSize: number,
  saveUnfullChunk: boolean,
  extraKeys: ExtraKeyStyle,
  memo: ChainMemo | null = new ChainMemo(DEFAULT_MEMO_TOKENS, chunkSize, digestOf(hash).length),
): ChainHasher {
  const cbor = hash === "sha256_cbor" || hash === "xxhash_cbor";
  const digest = digestOf(hash);
  const seedText = resolveSeed(hash, seed, undefined).seed;
  if (seedText === undefined) throw new Error(`hash "${hash}" needs a seed (docs/compat.md §2)`);
  const root = new Uint8Array(digest.length);
  digest.digestInto(cbor ? cborText(seedText) : PickleChainEncoder.encodeString(seedText), root);
  const parent = new Uint8Array(digest.length); // the block's parent, kept for the memo
  const encoder: ChainEncoder = cbor
    ? new CborChainEncoder(digest.length)
    : new PickleChainEncoder(digest.length);

  // One loop for both outputs: `onDigest` sees each digest in the encoder's parent slot.
  function run(
    tokens: ArrayLike<number>,
    extra: ExtraKeys | undefined,
    onDigest: (i: number, hex: string, parentSlot: Uint8Array) => void,
  ): number {
    const n = chunkCount(tokens.length, chunkSize, saveUnfullChunk);
    if (n === 0) return 0;
    const { first, rest } = extraTuples(extra, extraKeys);
    encoder.parent().set(root);
    for (let i = 0; i < n; i++) {
      const start = i * chunkSize;
      const end = Math.min(start + chunkSize, tokens.length);
      const extra = i === 0 ? first : rest;
      const remembering = memo !== null && extra === null;
      let slot = encoder.parent();
      let hex = remembering ? memo.find(slot, tokens, start, end, slot) : undefined;
      if (hex === undefined) {
        if (remembering) parent.set(slot);
        const bytes = encoder.encodeBlock(tokens, start, end, extra);
        slot = encoder.parent();
        hex = digest.digestInto(bytes, slot);
        if (remembering) memo.remember(parent, tokens, start, end, slot);
      }
      onDigest(i, hex, slot);
    }
    return n;
  }

  return {
    hash,
    strings(tokens, extra) {
      const out: string[] = [];
      run(tokens, extra, (_i, hex) => out.push(hex));
      return out;
    },
    digests(tokens, extra) {
      const out: Uint8Array[] = [];
      run(tokens, extra, (_i, _hex, slot) => out.push(slot.slice()));
      return out;
    },
  };
}
