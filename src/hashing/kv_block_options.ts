import type { ExtraKeyStyle, HashAlgorithm, KeySchemeOptions } from "./types.ts";

/**
 * The shape of a model's `kv` config block that matters for keys (src/config/schema.ts): chain
 * fields on the block, key-layout fields in `keyParams`.
 */
export interface KvKeyBlock {
  hash: HashAlgorithm;
  seed?: string;
  chunkSize: number;
  hashBlockSize?: number;
  saveUnfullChunk: boolean;
  /** vLLM's `extra_keys` layout; omitted, the key scheme's default ("tagged"). */
  extraKeys?: ExtraKeyStyle;
  keyFormat: string;
  requireAllRanks: boolean;
  keyParams: Omit<
    KeySchemeOptions,
    | "hash"
    | "seed"
    | "chunkSize"
    | "hashBlockSize"
    | "saveUnfullChunk"
    | "extraKeys"
    | "keyFormat"
    | "requireAllRanks"
  >;
}

/**
 * createKeyScheme() options for a model's `kv` block; `model` defaults to the model's name. An
 * omitted seed stays omitted, so the engine default applies (docs/compat.md §2).
 */
export function keySchemeOptionsFromKv(kv: KvKeyBlock, modelName: string): KeySchemeOptions {
  const options: KeySchemeOptions = {
    hash: kv.hash,
    chunkSize: kv.chunkSize,
    saveUnfullChunk: kv.saveUnfullChunk,
    keyFormat: kv.keyFormat,
    requireAllRanks: kv.requireAllRanks,
    ...kv.keyParams,
    model: kv.keyParams.model ?? modelName,
  };
  if (kv.seed !== undefined) options.seed = kv.seed;
  if (kv.hashBlockSize !== undefined) options.hashBlockSize = kv.hashBlockSize;
  if (kv.extraKeys !== undefined) options.extraKeys = kv.extraKeys;
  return options;
}
