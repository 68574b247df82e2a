import type { KeyFormatPreset } from "./types.ts";

/**
 * Which engine connector's layout a store key has (docs/compat.md §3), read from its text alone.
 * Pure: the start-up shape check and `keys --detect` classify a sample of `GET /get_all_keys`.
 */
export type KeyShape = KeyFormatPreset;

/** `[{cachePrefix}@]{basename}@tp_rank:{t}@pcp{c}@dcp{d}@pp_rank:{p}[@group:{g}]@{hex}` */
export const VLLM_KEY =
  /^(?:([^@]*)@)?([^@]+)@tp_rank:\d+@pcp\d+@dcp\d+@pp_rank:\d+(@group:\d+)?@([0-9a-f]+)$/;
/** `{model}@{world_size}@{worker_id}@{hex}@{dtype}[@{tag}%{value}...]` */
export const LMCACHE_KEY = /^(.+)@(\d+)@(\d+)@([0-9a-f]+)@([A-Za-z0-9_]+)((?:@[^@%]+%[^@]*)*)$/;
/** `[{tag}_][{model}_]{hex}_{rank}[_{pp}]_k|v` (MLA: `{hex}_[{pp}]_k`) */
export const SGLANG_KEY = /^(?:(.*)_)?([0-9a-f]{64})_(\d*)(?:_\d+)?_[kv]$/;
/** `{hex}_{rank}`, or a bare hash (Llumnix's TokenHasher keys). */
const LLUMNIX_KEY = /^(?:[0-9a-f]{32}|[0-9a-f]{64}|\d{1,20})(?:_\d+)?$/;

/** The layout of one key, or undefined when it matches none of the presets. */
export function keyShape(key: string): KeyShape | undefined {
  if (VLLM_KEY.test(key)) return "vllm-mooncake-store";
  if (LMCACHE_KEY.test(key)) return "lmcache";
  if (SGLANG_KEY.test(key)) return "sglang-hicache";
  if (LLUMNIX_KEY.test(key)) return "llumnix";
  return undefined;
}

/** How many keys of each layout a sample holds (layouts with none are left out). */
export function countKeyShapes(keys: Iterable<string>): Partial<Record<KeyShape, number>> {
  const counts: Partial<Record<KeyShape, number>> = {};
  for (const key of keys) {
    const shape = keyShape(key);
    if (shape !== undefined) counts[shape] = (counts[shape] ?? 0) + 1;
  }
  return counts;
}

/**
 * The start-up verdict: a warning's text when the configured layout is absent from a sample that
 * holds another one, else undefined (nothing to say, or too little known to say it).
 */
export function shapeMismatch(
  configured: KeyShape | undefined,
  counts: Partial<Record<KeyShape, number>>,
): string | undefined {
  if (configured === undefined || (counts[configured] ?? 0) > 0) return undefined;
  const held = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  if (held.length === 0) return undefined;
  const what = held.map(([shape, n]) => `${n} ${shape}`).join(", ");
  return `the KV store holds ${what} key(s) but none of the configured layout "${configured}"`;
}
