import { chainOptionProblems, effectiveSeed } from "./chain_hasher.ts";
import { createChainHasher } from "./hash_blocks.ts";
import { compileKeyFormat } from "./key_format.ts";
import type { ExtraKeys, KeyScheme, KeySchemeOptions } from "./types.ts";

export { createChainHasher, hashBlocks } from "./hash_blocks.ts";
export type { ChainHasher, ChainOptions } from "./chain_hasher.ts";
export { HASH_ALGORITHMS } from "./chain_hasher.ts";
export {
  createKeyFormatter,
  type KeyFormatOptions,
  type KeyFormatter,
  keysFromHashes,
} from "./key_format.ts";

/**
 * The chain hash + store-key layout of one engine deployment (docs/compat.md §2-3). Synchronous and
 * reusable: the root hash, key templates and encode buffers are built once here. Throws one
 * error listing every invalid option.
 *
 * The seed must equal the engines' PYTHONHASHSEED (vLLM) / GO_HASH_SEED (Llumnix); unset or
 * empty means "0". With `keyFormat: "lmcache"` extra keys are ignored, because LMCache hashes
 * `(parent, tokens, None)` whatever the request carries.
 */
export function createKeyScheme(options: KeySchemeOptions): KeyScheme {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      "createKeyScheme() needs an options object ({ hash, chunkSize, keyFormat })",
    );
  }
  const compiled = compileKeyFormat(options);
  const problems = [...chainOptionProblems(options), ...compiled.problems];
  if (compiled.formatter === null || problems.length > 0) {
    throw new Error(`Invalid key scheme options:\n- ${problems.join("\n- ")}`);
  }
  const formatter = compiled.formatter;
  const chain = createChainHasher(options);
  const ignoreExtra = options.keyFormat === "lmcache";
  const extraFor = (extra: ExtraKeys | undefined) => (ignoreExtra ? undefined : extra);
  const frozen: Readonly<KeySchemeOptions> = Object.freeze({
    ...options,
    seed: effectiveSeed(options.seed),
    saveUnfullChunk: options.saveUnfullChunk ?? false,
    requireAllRanks: options.requireAllRanks ?? false,
  });

  return {
    options: frozen,
    blockHashes: (tokens, extra) => chain.strings(tokens, extraFor(extra)),
    keys: (tokens, extra) => formatter.keys(chain.strings(tokens, extraFor(extra))),
    chunkKeys: (tokens, extra) => formatter.chunkKeys(chain.strings(tokens, extraFor(extra))),
  };
}
