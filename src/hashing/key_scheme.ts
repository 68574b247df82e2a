import { chainOptionProblems, DEFAULT_EXTRA_KEY_STYLE } from "./chain_hasher.ts";
import { createChainHasher } from "./hash_blocks.ts";
import { compileKeyFormat } from "./key_format.ts";
import { resolveSeed } from "./seed_policy.ts";
import type { ExtraKeys, KeyScheme, KeySchemeOptions } from "./types.ts";

export { createChainHasher, hashBlocks } from "./hash_blocks.ts";
export type { ChainHasher, ChainOptions } from "./chain_hasher.ts";
export { DEFAULT_EXTRA_KEY_STYLE, EXTRA_KEY_STYLES, HASH_ALGORITHMS } from "./chain_hasher.ts";
export {
  createKeyFormatter,
  type KeyFormatOptions,
  type KeyFormatter,
  keysFromHashes,
} from "./key_format.ts";
export { describeSeed, LLUMNIX_DEFAULT_SEED, VLLM_DEFAULT_SEED } from "./seed_policy.ts";

/** Every invalid option of a key scheme, one problem each (also in the message). */
export class KeySchemeError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid key scheme options:\n- ${problems.join("\n- ")}`);
    this.name = "KeySchemeError";
  }
}

/**
 * The chain hash + store-key layout of one engine deployment (docs/compat.md §2-3). Synchronous and
 * reusable: the root hash, key templates and encode buffers are built once here. Throws one
 * error listing every invalid option.
 *
 * `seed` is hashed exactly as given (`keyFormat: "llumnix"` reads "" as "0"); omitted, it is the
 * engine's default, and xxhash chains without one are refused (docs/compat.md §2). The seed in
 * use is `options.seed`, its origin `seedSource`. With `keyFormat: "lmcache"` extra keys are
 * ignored, because LMCache hashes `(parent, tokens, None)` whatever the request carries.
 * `extraKeys` defaults to "tagged", what vLLM >= 0.31.0 hashes; a tagged LoRA request without
 * `loraPath` throws when hashed.
 */
export function createKeyScheme(options: KeySchemeOptions): KeyScheme {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      "createKeyScheme() needs an options object ({ hash, chunkSize, keyFormat })",
    );
  }
  const compiled = compileKeyFormat(options);
  const resolved = typeof options.seed === "string" || options.seed === undefined
    ? resolveSeed(options.hash, options.seed, String(options.keyFormat))
    : { seed: options.seed, source: "given" as const };
  const chainOptions = { ...options, seed: resolved.seed };
  const problems = [...chainOptionProblems(chainOptions), ...compiled.problems];
  if (compiled.formatter === null || problems.length > 0) {
    throw new KeySchemeError(problems);
  }
  const formatter = compiled.formatter;
  const chain = createChainHasher(chainOptions);
  const ignoreExtra = options.keyFormat === "lmcache";
  const extraFor = (extra: ExtraKeys | undefined) => (ignoreExtra ? undefined : extra);
  const unfullChunks = options.saveUnfullChunk === true;
  const lastUnfull = (tokens: ArrayLike<number>) =>
    unfullChunks && tokens.length % options.chunkSize !== 0;
  const frozen: Readonly<KeySchemeOptions> = Object.freeze({
    ...options,
    seed: resolved.seed,
    saveUnfullChunk: unfullChunks,
    extraKeys: options.extraKeys ?? DEFAULT_EXTRA_KEY_STYLE,
    requireAllRanks: options.requireAllRanks ?? false,
  });

  return {
    options: frozen,
    seedSource: resolved.source,
    blockHashes: (tokens, extra) => chain.strings(tokens, extraFor(extra)),
    keys: (tokens, extra) =>
      formatter.keys(chain.strings(tokens, extraFor(extra)), lastUnfull(tokens)),
    chunkKeys: (tokens, extra) =>
      formatter.chunkKeys(chain.strings(tokens, extraFor(extra)), lastUnfull(tokens)),
    hashed: (tokens, extra) => {
      const blockHashes = chain.strings(tokens, extraFor(extra));
      return { blockHashes, chunkKeys: formatter.chunkKeys(blockHashes, lastUnfull(tokens)) };
    },
  };
}
export { keySchemeOptionsFromKv, type KvKeyBlock } from "./kv_block_options.ts";
