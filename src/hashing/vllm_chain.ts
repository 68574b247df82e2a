import { type ChainHasher, chunkCount } from "./chain_hasher.ts";
import { CborChainEncoder, cborText } from "./cbor_chain_encoder.ts";
import { type ExtraTuple, extraTuples } from "./extra_tuple.ts";
import { PickleChainEncoder } from "./pickle_chain_encoder.ts";
import { resolveSeed } from "./seed_policy.ts";
import { type BlockDigest, sha256Digest } from "./sha256_digest.ts";
import type { ExtraKeys, ExtraKeyStyle } from "./types.ts";
import { xxh3_128Digest } from "./xxhash_wasm.ts";

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
 * `extraKeys` is the layout of `extra_keys` (tagged from vLLM 0.31.0 on).
 */
export function createVllmChain(
  hash: VllmHashAlgorithm,
  seed: string | undefined,
  chunkSize: number,
  saveUnfullChunk: boolean,
  extraKeys: ExtraKeyStyle,
): ChainHasher {
  const cbor = hash === "sha256_cbor" || hash === "xxhash_cbor";
  const digest: BlockDigest = hash.startsWith("sha256") ? sha256Digest : xxh3_128Digest;
  const seedText = resolveSeed(hash, seed, undefined).seed;
  if (seedText === undefined) throw new Error(`hash "${hash}" needs a seed (docs/compat.md §2)`);
  const root = new Uint8Array(digest.length);
  digest.digestInto(cbor ? cborText(seedText) : PickleChainEncoder.encodeString(seedText), root);
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
      const bytes = encoder.encodeBlock(tokens, start, end, i === 0 ? first : rest);
      const slot = encoder.parent();
      onDigest(i, digest.digestInto(bytes, slot), slot);
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
