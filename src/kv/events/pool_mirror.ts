import type { KeyLocation, LookupResult } from "../types.ts";
import type { MasterKvEvent, MasterKvEventBatch } from "./master_kv_event.ts";

/**
 * What the Mooncake store holds, mirrored from its master's KV events: the keys present in the
 * pool (not where: the events name no segment). Exact only after a snapshot of the master's keys
 * (`GET /get_all_keys`) taken while the events were already held, or from the master's first
 * batch (seq 1: a master that just started holds nothing), and while no batch is missing since.
 * A gap, a master that starts again mid-stream, or an overflow makes it `untrusted` until the
 * next snapshot; the router then asks the master per request as before. Pure: no I/O.
 */
export type PoolMirrorState = "exact" | "untrusted";

export interface PoolMirrorCounters {
  batches: number;
  gaps: number;
  restarts: number;
  snapshots: number;
  snapshotsFailed: number;
  overflows: number;
  droppedPending: number;
}

/**
 * Requests answered by the mirror alone (no lookup), requests also looked up to check it, and
 * how those lookups agreed with it, key by key.
 */
export interface PoolMirrorLookups {
  answered: number;
  crossChecked: number;
  keysAgreed: number;
  keysDisagreed: number;
}

export class PoolMirror {
  readonly lookups: PoolMirrorLookups = {
    answered: 0,
    crossChecked: 0,
    keysAgreed: 0,
    keysDisagreed: 0,
  };
  readonly #keys = new Set<string>();
  readonly #maxKeys: number;
  readonly #maxPending: number;
  #complete = false;
  #lastSeq: bigint | undefined;
  /** Batches held while a snapshot is being read. */
  #pending: MasterKvEventBatch[] | undefined;
  readonly counters: PoolMirrorCounters = {
    batches: 0,
    gaps: 0,
    restarts: 0,
    snapshots: 0,
    snapshotsFailed: 0,
    overflows: 0,
    droppedPending: 0,
  };

  constructor(options: { maxKeys?: number; maxPending?: number } = {}) {
    this.#maxKeys = options.maxKeys ?? 4_000_000;
    this.#maxPending = options.maxPending ?? 100_000;
  }

  get state(): PoolMirrorState {
    return this.#complete && this.#pending === undefined ? "exact" : "untrusted";
  }

  get size(): number {
    return this.#keys.size;
  }

  get snapshotting(): boolean {
    return this.#pending !== undefined;
  }

  /** Whether the pool holds `key`; undefined unless exact. */
  has(key: string): boolean | undefined {
    return this.state === "exact" ? this.#keys.has(key) : undefined;
  }

  /** A live batch; true when the mirror needs a snapshot now (it holds the batches meanwhile). */
  receive(batch: MasterKvEventBatch): boolean {
    if (this.#pending) {
      if (this.#pending.length < this.#maxPending) this.#pending.push(batch);
      else this.counters.droppedPending++;
      return false;
    }
    const last = this.#lastSeq;
    if (last !== undefined && batch.seq === last + 1n) {
      this.#apply(batch);
      return false;
    }
    if (batch.seq === 1n) {
      // The master's first batch: it started with an empty store.
      if (last !== undefined) this.counters.restarts++;
      this.#keys.clear();
      this.#complete = true;
      this.#apply(batch);
      return false;
    }
    if (last === undefined && this.#complete) {
      // The connection's first batch, after its snapshot: the batches before it were published
      // before the subscription took effect, so before the snapshot was read.
      this.#apply(batch);
      return false;
    }
    if (last !== undefined) {
      if (batch.seq > last) this.counters.gaps++;
      else this.counters.restarts++;
    }
    // Missed history, all of it published before this batch: hold it and what follows until a
    // snapshot read from now on covers what was missed.
    this.#complete = false;
    this.#lastSeq = batch.seq - 1n;
    this.#pending = [batch];
    return true;
  }

  /**
   * Holds live batches from now until `snapshot` (call it before reading the master's keys);
   * returns the snapshot's ticket.
   */
  beginSnapshot(): number {
    this.#pending ??= [];
    return this.#generation;
  }

  /** The publisher is gone: untrusted now, and a snapshot under way no longer counts. */
  invalidate(): void {
    this.#generation++;
    this.#pending = undefined;
    this.#complete = false;
    this.#lastSeq = undefined; // nothing received on the next connection yet
  }

  #generation = 0;

  /**
   * The master's keys, read after `beginSnapshot`: the mirror is those keys plus every batch held
   * meanwhile, exact unless a batch is missing among them or before them since the last one
   * received. `null`: the snapshot could not be read.
   */
  snapshot(keys: readonly string[] | null, ticket = this.#generation): void {
    if (ticket !== this.#generation) return; // invalidated meanwhile
    const held = (this.#pending ?? []).sort((a, b) => (a.seq < b.seq ? -1 : 1));
    this.#pending = undefined;
    if (keys === null) {
      this.counters.snapshotsFailed++;
      this.#complete = false;
      return;
    }
    this.counters.snapshots++;
    this.#keys.clear();
    for (const key of keys) this.#keys.add(key);
    this.#complete = this.#keys.size <= this.#maxKeys;
    // A batch missing after the last one received before the snapshot may have been published
    // after the keys were read: only a held batch that follows it on keeps the mirror exact.
    for (const batch of held) {
      if (this.#lastSeq !== undefined && batch.seq !== this.#lastSeq + 1n) this.#complete = false;
      this.#apply(batch);
    }
  }

  #apply(batch: MasterKvEventBatch): void {
    this.#lastSeq = batch.seq;
    this.counters.batches++;
    for (const event of batch.events) this.#applyEvent(event);
    if (this.#keys.size > this.#maxKeys) {
      this.counters.overflows++;
      this.#keys.clear();
      this.#complete = false;
    }
  }

  #applyEvent(event: MasterKvEvent): void {
    if (event.type === "cleared") this.#keys.clear();
    else if (event.type === "stored") this.#keys.add(event.key);
    else this.#keys.delete(event.key);
  }
}

/** The mirror's answer for `keys`, shaped as a store lookup's (no holders: the events name none). */
export function mirrorLookup(mirror: PoolMirror, keys: readonly string[]): LookupResult {
  const locations = new Map<string, KeyLocation>();
  for (const key of keys) {
    locations.set(key, {
      present: mirror.has(key) === true,
      memoryHosts: [],
      localDiskHosts: [],
      sharedDisk: false,
    });
  }
  return {
    outcome: "mirror",
    locations,
    keysQueried: keys.length,
    batches: 0,
    attempts: 0,
    elapsedMs: 0,
  };
}

/** Counts, per key, whether the master's own answer (an `ok` lookup) agrees with the mirror's. */
export function crossCheck(mirror: PoolMirror, mirrored: LookupResult, stored: LookupResult): void {
  if (stored.outcome !== "ok") return;
  mirror.lookups.crossChecked++;
  for (const [key, guess] of mirrored.locations) {
    const truth = stored.locations.get(key)?.present === true;
    if (truth === guess.present) mirror.lookups.keysAgreed++;
    else mirror.lookups.keysDisagreed++;
  }
}
