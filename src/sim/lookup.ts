import { computePrefixHits, type KvPlacement } from "../kv/prefix.ts";
import type { KeyLocation, PrefixHits } from "../kv/types.ts";
import type { BlockCache } from "./block_cache.ts";

/**
 * The router's prefix lookup over simulated instances: the trace's hash ids are the store keys,
 * each instance's KV host is its own name, and `computePrefixHits` (src/kv/prefix.ts) turns the
 * locations into local and pool prefixes. Keys past the first absent block cannot extend any
 * prefix: the lookup stops there.
 */
export function lookupPrefix(
  engines: readonly { name: string; cache: BlockCache }[],
  placements: readonly KvPlacement[],
  hashIds: readonly number[],
): PrefixHits {
  const chunkKeys: string[][] = [];
  const locations = new Map<string, KeyLocation>();
  for (const id of hashIds) {
    const key = String(id);
    chunkKeys.push([key]);
    const memoryHosts: string[] = [];
    for (const engine of engines) if (engine.cache.has(id)) memoryHosts.push(engine.name);
    locations.set(key, {
      present: memoryHosts.length > 0,
      memoryHosts,
      localDiskHosts: [],
      sharedDisk: false,
    });
    if (memoryHosts.length === 0) break;
  }
  return computePrefixHits(chunkKeys, locations, placements);
}

/** Blocks from the first one held by some instance (what a pool-reading engine can load). */
export function poolPrefixLength(
  engines: readonly { cache: BlockCache }[],
  blocks: readonly number[],
): number {
  let length = 0;
  while (length < blocks.length && engines.some((e) => e.cache.has(blocks[length]))) length++;
  return length;
}
