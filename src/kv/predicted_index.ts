import type { KeyLocation, KvIndex, LookupResult } from "./types.ts";
import { normalizeHost } from "./prefix.ts";

/**
 * What the router itself knows is about to exist: after dispatching a request to instance X, its
 * chunk keys are "being written by X" for a short TTL. The store only lists a key once the engine
 * has finished its prefill and written it, so without this a burst of requests sharing a new
 * prefix would scatter; with it they follow the first one. Answers like the store would
 * (`KeyLocation` with X's KV host as memory host), marked `predicted`.
 *
 * Memory is bounded: at most `maxEntries` keys, least recently recorded or read dropped first.
 * Pure: time comes from the clock passed in.
 */
export interface PredictedIndexOptions {
  now: () => number;
  /** How long a dispatch vouches for its keys (default 5 000 ms). */
  ttlMs?: number;
  /** Keys remembered at most (default 200 000: ~70 MB of heap with 66-character keys). */
  maxEntries?: number;
}

/** Who is writing: the instance and the host its KV segment reports (when it has one). */
export interface PredictedWriter {
  instanceId: string;
  kvHost?: string;
}

interface Writer {
  host: string | undefined;
  expiresAt: number;
  /**
   * Dispatches vouching for the keys on this instance, not forgotten since: a cancelled one must
   * not take back what another request sent there is still writing. Another replica's (silent)
   * records count too; they are never forgotten here.
   */
  claims: number;
  /**
   * When the claims were last counted from 1 (the first record, or one after the prediction
   * expired or was dropped): a dispatch recorded before that has no claim left to take back.
   */
  since: number;
}

export class PredictedIndex implements KvIndex {
  readonly #listeners = new Set<(keys: readonly string[], writer: PredictedWriter) => void>();
  readonly #now: () => number;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  /** Key → writers by instance id. Map order is recency order (oldest first). */
  readonly #entries = new Map<string, Map<string, Writer>>();
  #evicted = 0;

  constructor(options: PredictedIndexOptions) {
    this.#now = options.now;
    this.#ttlMs = options.ttlMs !== undefined && options.ttlMs >= 0 ? options.ttlMs : 5_000;
    this.#maxEntries = options.maxEntries !== undefined && options.maxEntries >= 1
      ? Math.floor(options.maxEntries)
      : 200_000;
  }

  /** Listens to predictions recorded from now on (not the `silent` ones: another replica's). */
  observe(listener: (keys: readonly string[], writer: PredictedWriter) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Record that `writer` is writing `keys` (call right after dispatch); returns the record's time,
   * which `forget` takes to know whether that record still counts.
   */
  record(
    keys: readonly string[],
    writer: PredictedWriter,
    options: { silent?: boolean } = {},
  ): number {
    if (!options.silent) { for (const listener of this.#listeners) listener(keys, writer); }
    const now = this.#now();
    const host = writer.kvHost === undefined || writer.kvHost.trim() === ""
      ? undefined
      : normalizeHost(writer.kvHost);
    const expiresAt = now + this.#ttlMs;
    for (const key of keys) {
      const writers = this.#entries.get(key) ?? new Map<string, Writer>();
      this.#entries.delete(key);
      const prior = writers.get(writer.instanceId);
      const live = prior !== undefined && prior.expiresAt > now;
      writers.set(writer.instanceId, {
        host,
        expiresAt,
        claims: live ? prior.claims + 1 : 1,
        since: live ? prior.since : now,
      });
      this.#entries.set(key, writers);
    }
    this.#evict(now);
    return now;
  }

  /** The prediction for one key, or undefined when nobody is writing it (synchronous). */
  peek(key: string): KeyLocation | undefined {
    const writers = this.#entries.get(key);
    if (writers === undefined) return undefined;
    const now = this.#now();
    const hosts: string[] = [];
    for (const [instanceId, writer] of writers) {
      if (writer.expiresAt <= now) {
        writers.delete(instanceId);
        continue;
      }
      if (writer.host !== undefined && !hosts.includes(writer.host)) hosts.push(writer.host);
    }
    this.#entries.delete(key);
    if (writers.size === 0) return undefined;
    this.#entries.set(key, writers);
    return {
      present: true,
      memoryHosts: hosts,
      localDiskHosts: [],
      sharedDisk: false,
      predicted: true,
    };
  }

  lookup(keys: string[]): Promise<LookupResult> {
    const started = this.#now();
    const locations = new Map<string, KeyLocation>();
    const unique = new Set(keys);
    for (const key of unique) {
      const location = this.peek(key);
      if (location !== undefined) locations.set(key, location);
    }
    return Promise.resolve({
      outcome: keys.length === 0 ? "skipped" : "ok",
      locations,
      keysQueried: unique.size,
      batches: 0,
      attempts: 0,
      elapsedMs: Math.max(0, this.#now() - started),
    });
  }

  /**
   * Takes back the `record` of `keys` on an instance made at `recordedAt` (that dispatch will not
   * write them): the prediction goes once no other recorded dispatch there vouches for it. A key
   * whose claims were counted afresh after `recordedAt` holds no claim of that dispatch.
   */
  forget(keys: readonly string[], instanceId: string, recordedAt: number): void {
    for (const key of keys) {
      const writers = this.#entries.get(key);
      const writer = writers?.get(instanceId);
      if (!writers || !writer || writer.since > recordedAt || --writer.claims > 0) continue;
      writers.delete(instanceId);
      if (writers.size === 0) this.#entries.delete(key);
    }
  }

  /** Keys currently held (expired ones included until they are swept). */
  get size(): number {
    return this.#entries.size;
  }

  /** Keys dropped because `maxEntries` was reached (expired ones do not count). */
  get evictedTotal(): number {
    return this.#evicted;
  }

  #evict(now: number): void {
    // Oldest first: sweep expired keys at the front, then drop live ones beyond the bound.
    for (const [key, writers] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && !allExpired(writers, now)) break;
      this.#entries.delete(key);
      if (!allExpired(writers, now)) this.#evicted++;
    }
  }
}

function allExpired(writers: Map<string, Writer>, now: number): boolean {
  for (const writer of writers.values()) if (writer.expiresAt > now) return false;
  return true;
}
