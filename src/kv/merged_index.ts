import type { KeyLocation, KvIndex, LookupResult } from "./types.ts";

/**
 * The store's answer plus the router's own predictions: per key, the union of the two
 * (present if either says so, memory hosts of both). The prediction answers even when the store
 * is down, skipped or too slow, so a burst sharing a new prefix follows its first request.
 * `outcome`, `batches` and `attempts` are the store's; `locations` are always usable.
 *
 * A library building block (exported from mod.ts); the router does not use it: its dispatcher asks
 * the store, then calls `withLatestPredictions` in the synchronous step that decides.
 */
export class MergedIndex implements KvIndex {
  readonly #store: KvIndex;
  readonly #predicted: KvIndex;

  constructor(store: KvIndex, predicted: KvIndex) {
    this.#store = store;
    this.#predicted = predicted;
  }

  async lookup(
    keys: string[],
    options?: { deadlineMs?: number; signal?: AbortSignal },
  ): Promise<LookupResult> {
    // The prediction is read after the store answered, so overlapping lookups see the dispatches
    // decided while the store was asked. Those decided after this returns are not: a caller that
    // awaits anything before deciding adds them with `withLatestPredictions`.
    const store = await failOpen(this.#store, keys, options);
    const predicted = await failOpen(this.#predicted, keys, options);
    const { locations, predictedKeys } = mergeLocations(store.locations, predicted.locations);
    const merged: LookupResult = {
      ...store,
      locations,
      keysQueried: Math.max(store.keysQueried, predicted.keysQueried),
      elapsedMs: Math.max(store.elapsedMs, predicted.elapsedMs),
      predictedKeys,
    };
    return merged;
  }
}

/**
 * Adds the predictions recorded since `result` was produced (synchronous): a dispatcher calls
 * it right before deciding, in the same synchronous step as the decision and its reservation,
 * so that requests of a burst whose lookups overlapped still see each other's dispatches.
 */
export function withLatestPredictions(
  result: LookupResult,
  keys: readonly string[],
  predicted: { peek(key: string): KeyLocation | undefined },
): LookupResult {
  const latest = new Map<string, KeyLocation>();
  for (const key of new Set(keys)) {
    const location = predicted.peek(key);
    if (location !== undefined) latest.set(key, location);
  }
  if (latest.size === 0) return result;
  const { locations, predictedKeys } = mergeLocations(result.locations, latest);
  return { ...result, locations, predictedKeys: (result.predictedKeys ?? 0) + predictedKeys };
}

/** Per key, the union of what the store says and what was predicted. Pure. */
export function mergeLocations(
  store: ReadonlyMap<string, KeyLocation>,
  predicted: ReadonlyMap<string, KeyLocation>,
): { locations: Map<string, KeyLocation>; predictedKeys: number } {
  const locations = new Map<string, KeyLocation>(store);
  let predictedKeys = 0;
  for (const [key, guess] of predicted) {
    if (!guess.present) continue;
    const known = store.get(key);
    if (known === undefined || !known.present) predictedKeys++;
    locations.set(
      key,
      known === undefined || !known.present
        ? { ...guess, predicted: true, pendingWrite: true }
        : union(known, guess),
    );
  }
  return { locations, predictedKeys };
}

function union(known: KeyLocation, guess: KeyLocation): KeyLocation {
  const memoryHosts = [...known.memoryHosts];
  for (const host of guess.memoryHosts) if (!memoryHosts.includes(host)) memoryHosts.push(host);
  const location: KeyLocation = {
    present: true,
    memoryHosts,
    localDiskHosts: [...known.localDiskHosts],
    sharedDisk: known.sharedDisk,
  };
  // Marked when the prediction changed anything the dispatcher reads.
  if (!known.present || memoryHosts.length > known.memoryHosts.length) location.predicted = true;
  return location;
}

async function failOpen(
  index: KvIndex,
  keys: string[],
  options?: { deadlineMs?: number; signal?: AbortSignal },
): Promise<LookupResult> {
  try {
    return await index.lookup(keys, options);
  } catch (error) {
    return {
      outcome: "failed",
      locations: new Map(),
      keysQueried: new Set(keys).size,
      batches: 0,
      attempts: 0,
      elapsedMs: 0,
      error: `index lookup threw: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}
