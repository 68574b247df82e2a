import type { KeyLocation, PrefixHits } from "./types.ts";

/** The part of an instance that matters for locality: its id and the host its KV segment reports. */
export interface KvPlacement {
  id: string;
  kvHost?: string;
}

/**
 * Pool and per-instance local prefixes, in chunks, counted from chunk 0 only (docs/compat.md §4,
 * "What a hit means"). A chunk counts when every one of its keys (all ranks, `_k`/`_v`) counts.
 * Pure: the lookup's answer in, prefixes out.
 */
export function computePrefixHits(
  chunkKeys: readonly (readonly string[])[],
  locations: ReadonlyMap<string, KeyLocation>,
  instances: readonly KvPlacement[],
): PrefixHits {
  // The pool holds what the store confirms; a write still in flight cannot be read from it yet.
  let poolChunks = 0;
  while (
    poolChunks < chunkKeys.length &&
    chunkKeys[poolChunks].every((key) => {
      const location = locations.get(key);
      return location?.present === true && location.pendingWrite !== true;
    })
  ) poolChunks++;

  const localChunks = new Map<string, number>();
  for (const instance of instances) {
    let chunks = 0;
    const host = instance.kvHost === undefined ? undefined : normalizeHost(instance.kvHost);
    if (host !== undefined) {
      // The writer of a pending chunk counts it as local: requests queued behind it reuse it.
      while (
        chunks < chunkKeys.length &&
        chunkKeys[chunks].every((key) => {
          const location = locations.get(key);
          return location?.present === true && location.memoryHosts.includes(host);
        })
      ) chunks++;
    }
    localChunks.set(instance.id, chunks);
  }
  return { poolChunks, localChunks };
}

/**
 * The store's (and the router's predictions') local prefixes, raised to what the engines' own
 * caches hold by their KV events (src/kv/events/engine_caches.ts: exact mirrors only). Pure.
 */
export function withEngineHits(
  hits: PrefixHits,
  engineHits: ReadonlyMap<string, number>,
): PrefixHits {
  if (engineHits.size === 0) return hits;
  const localChunks = new Map(hits.localChunks);
  for (const [id, chunks] of engineHits) {
    localChunks.set(id, Math.max(localChunks.get(id) ?? 0, chunks));
  }
  return { poolChunks: hits.poolChunks, localChunks };
}

/** `[fe80::1]` and `fe80::1` name the same host; hosts compare case-insensitively. */
export function normalizeHost(host: string): string {
  const trimmed = host.trim().toLowerCase();
  return trimmed.startsWith("[") && trimmed.endsWith("]") ? trimmed.slice(1, -1) : trimmed;
}
