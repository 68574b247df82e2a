import type { ExtraKeys, ExtraKeyStyle } from "./types.ts";

/** One string of a vLLM `extra_keys` tuple, with its UTF-8 bytes encoded once per request. */
export interface ExtraItem {
  readonly text: string;
  readonly utf8: Uint8Array;
}

/** One element of the tuple: a string ("plain") or a tuple of strings ("tagged"). */
export type ExtraKey = ExtraItem | readonly ExtraItem[];

/** The third element of vLLM's hashed tuple: `None` (null) or a tuple of extra keys. */
export type ExtraTuple = readonly ExtraKey[] | null;

/** The extra-keys tuples of a request: one for block 0, one for every later block. */
export interface ExtraTuples {
  readonly first: ExtraTuple;
  readonly rest: ExtraTuple;
}

const NO_EXTRA: ExtraTuples = { first: null, rest: null };
const utf8Encoder = new TextEncoder();
const LORA_TAG = item("lora");
const SALT_TAG = item("cache_salt");

/** True for a tagged key (a tuple of strings), false for a plain string. */
export function isTupleKey(key: ExtraKey): key is readonly ExtraItem[] {
  return Array.isArray(key);
}

/**
 * vLLM's `generate_block_hash_extra_keys` for text-only requests: the tuple is
 * `lora_extra_keys + mm_extra_keys + cache_salt_keys + prompt_embeds_keys`, so the LoRA key
 * (every block) comes before `cache_salt` (block 0 only), and an empty tuple becomes `None`.
 * vLLM tests the LoRA *request* for presence, so a LoRA named "" still adds a key; it tests
 * `cache_salt` for truthiness, so an empty salt is absent (docs/compat.md §2). "tagged" (vLLM
 * >= 0.31.0) adds `("lora", name, path)` / `("cache_salt", salt)`, "plain" the bare strings.
 */
export function extraTuples(extra: ExtraKeys | undefined, style: ExtraKeyStyle): ExtraTuples {
  if (extra === undefined) return NO_EXTRA;
  checkTypes(extra);
  const { loraName, cacheSalt } = extra;
  const lora = loraName === undefined ? [] : [loraKey(loraName, extra.loraPath, style)];
  const salt = cacheSalt
    ? [style === "tagged" ? [SALT_TAG, item(cacheSalt)] : item(cacheSalt)]
    : [];
  const first = [...lora, ...salt];
  if (first.length === 0) return NO_EXTRA;
  return { first, rest: lora.length > 0 ? lora : null };
}

/** True when the request carries any extra key. */
export function hasExtra(extra: ExtraKeys | undefined): boolean {
  return extra !== undefined && (extra.loraName !== undefined || Boolean(extra.cacheSalt));
}

function loraKey(name: string, path: string | undefined, style: ExtraKeyStyle): ExtraKey {
  if (style === "plain") return item(name);
  // vLLM refuses an empty lora_path, so an empty one can only mean "not known".
  if (!path) {
    throw new Error(
      `LoRA ${JSON.stringify(name)} has no adapter path, and vLLM >= 0.31.0 hashes ` +
        `("lora", name, path): set the path the engine was given on the model's loras entry, ` +
        `or kv.extraKeys "plain" for vLLM 0.30 and older`,
    );
  }
  return [LORA_TAG, item(name), item(path)];
}

function checkTypes(extra: ExtraKeys): void {
  for (const field of ["loraName", "loraPath", "cacheSalt"] as const) {
    const value = extra[field];
    if (value !== undefined && typeof value !== "string") {
      throw new TypeError(`extra.${field} must be a string, got ${typeof value}`);
    }
  }
}

function item(text: string): ExtraItem {
  return { text, utf8: utf8Encoder.encode(text) };
}
