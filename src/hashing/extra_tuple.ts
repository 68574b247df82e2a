import type { ExtraKeys } from "./types.ts";

/** One string of a vLLM `extra_keys` tuple, with its UTF-8 bytes encoded once per request. */
export interface ExtraItem {
  readonly text: string;
  readonly utf8: Uint8Array;
}

/** The third element of vLLM's hashed tuple: `None` (null) or a tuple of strings. */
export type ExtraTuple = readonly ExtraItem[] | null;

/** The extra-keys tuples of a request: one for block 0, one for every later block. */
export interface ExtraTuples {
  readonly first: ExtraTuple;
  readonly rest: ExtraTuple;
}

const NO_EXTRA: ExtraTuples = { first: null, rest: null };
const utf8Encoder = new TextEncoder();

/**
 * vLLM's `generate_block_hash_extra_keys` for text-only requests: the tuple is
 * `lora_extra_keys + mm_extra_keys + cache_salt_keys + prompt_embeds_keys`, so the LoRA name
 * (every block) comes before `cache_salt` (block 0 only), and an empty tuple becomes `None`.
 * vLLM tests the LoRA *request* for presence, so a LoRA named "" still adds `("",)`; it tests
 * `cache_salt` for truthiness, so an empty salt is absent (docs/compat.md §2).
 */
export function extraTuples(extra: ExtraKeys | undefined): ExtraTuples {
  if (extra === undefined) return NO_EXTRA;
  const { loraName, cacheSalt } = extra;
  if (loraName !== undefined && typeof loraName !== "string") {
    throw new TypeError(`extra.loraName must be a string, got ${typeof loraName}`);
  }
  if (cacheSalt !== undefined && typeof cacheSalt !== "string") {
    throw new TypeError(`extra.cacheSalt must be a string, got ${typeof cacheSalt}`);
  }
  const lora = loraName !== undefined ? [item(loraName)] : [];
  const first = cacheSalt ? [...lora, item(cacheSalt)] : lora;
  if (first.length === 0) return NO_EXTRA;
  return { first, rest: lora.length > 0 ? lora : null };
}

/** True when the request carries any extra key. */
export function hasExtra(extra: ExtraKeys | undefined): boolean {
  return extra !== undefined && (extra.loraName !== undefined || Boolean(extra.cacheSalt));
}

function item(text: string): ExtraItem {
  return { text, utf8: utf8Encoder.encode(text) };
}
