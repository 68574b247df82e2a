import type { EngineKvEvent, EngineKvEventBatch } from "./engine_kv_event.ts";

/**
 * One engine's own prefix cache, mirrored from its KV events (src/kv/events/engine_kv_event.ts):
 * which blocks it holds, on any medium (GPU, or CPU with offloading). The mirror is exact only
 * while it has seen every batch since a point where it knew the whole cache: the publisher's
 * first batch (seq 0), or an `AllBlocksCleared`. A gap in sequence numbers (a slow consumer's
 * dropped messages), a publisher that restarts mid-history or an overflow makes it `untrusted`:
 * it answers nothing (the router then counts what the store and its own dispatches say) until a
 * replay from the publisher's buffer fills the gap or the cache is cleared. Pure: no I/O, no
 * clock; src/runtime/engine_event_feed.ts feeds it.
 */
export type EngineIndexState = "exact" | "untrusted";

export interface EngineIndexCounters {
  /** Batches applied (live or replayed). */
  batches: number;
  /** Sequence gaps seen (live messages lost). */
  gaps: number;
  /** The publisher started again from seq 0 (the engine restarted): the mirror was emptied. */
  restarts: number;
  /** Replays that filled a gap, and those that could not (the publisher's buffer had moved on). */
  resynced: number;
  resyncFailed: number;
  /** Times the mirror grew past `maxBlocks` and was dropped. */
  overflows: number;
  /** Live batches dropped while a replay was under way (beyond `maxPending`). */
  droppedPending: number;
}

/** What the feed should do after a live batch: nothing, or ask for a replay from `from`. */
export type ReceiveResult = { resync: false } | { resync: true; from: bigint };

const MEDIUMS = new Map([["GPU", 1], ["CPU", 2], ["STORAGE", 4]]);
const OTHER_MEDIUM = 8;

export class EngineBlockIndex {
  readonly #maxBlocks: number;
  readonly #maxPending: number;
  /** Block id → bit mask of the media holding it. */
  readonly #blocks = new Map<string, number>();
  /** The mirror holds the whole cache: its history starts at seq 0 or a clear, with no hole. */
  #complete = false;
  /** The last batch applied; undefined before the first. */
  #lastSeq: bigint | undefined;
  /** Live batches held while a replay is under way. */
  #pending: EngineKvEventBatch[] | undefined;
  readonly counters: EngineIndexCounters = {
    batches: 0,
    gaps: 0,
    restarts: 0,
    resynced: 0,
    resyncFailed: 0,
    overflows: 0,
    droppedPending: 0,
  };

  constructor(options: { maxBlocks?: number; maxPending?: number } = {}) {
    this.#maxBlocks = options.maxBlocks ?? 1_000_000;
    this.#maxPending = options.maxPending ?? 10_000;
  }

  get state(): EngineIndexState {
    return this.#complete && this.#pending === undefined ? "exact" : "untrusted";
  }

  get size(): number {
    return this.#blocks.size;
  }

  /** The engine's block size, from its last BlockStored event (undefined before one). */
  get blockSize(): number | undefined {
    return this.#blockSize;
  }

  #blockSize: number | undefined;

  /** A replay is under way (live batches are held meanwhile). */
  get resyncing(): boolean {
    return this.#pending !== undefined;
  }

  /** Consecutive blocks from the first that the engine holds; undefined unless exact. */
  prefixBlocks(ids: readonly string[]): number | undefined {
    if (this.state !== "exact") return undefined;
    let n = 0;
    while (n < ids.length && this.#blocks.has(ids[n])) n++;
    return n;
  }

  /** A live batch. While a replay is under way it is held until `replayed`. */
  receive(batch: EngineKvEventBatch): ReceiveResult {
    if (this.#pending) {
      if (this.#pending.length < this.#maxPending) this.#pending.push(batch);
      else this.counters.droppedPending++;
      return { resync: false };
    }
    const last = this.#lastSeq;
    if (batch.seq === 0n) {
      // The publisher's first batch: its engine's cache started empty with it.
      if (last !== undefined) this.counters.restarts++;
      this.#blocks.clear();
      this.#complete = true;
      this.#apply(batch);
      return { resync: false };
    }
    if (last !== undefined && batch.seq === last + 1n) {
      this.#apply(batch);
      return { resync: false };
    }
    if (last !== undefined && batch.seq > last) {
      this.counters.gaps++;
      return this.#hold(batch, last + 1n);
    }
    // Joined mid-history, or the publisher restarted and its start was missed.
    if (last !== undefined) this.counters.restarts++;
    return this.#hold(batch, this.beginFullResync());
  }

  /**
   * Forgets the mirror and asks for the publisher's whole buffer (from seq 0): how an untrusted
   * mirror tries to become exact again. Returns the seq to replay from.
   */
  beginFullResync(): bigint {
    this.#blocks.clear();
    this.#complete = false;
    this.#lastSeq = undefined;
    this.#pending ??= [];
    return 0n;
  }

  /**
   * Asks for what the publisher sent after the last batch applied: messages lost at the end of a
   * run (nothing after them shows a gap) or while disconnected. Undefined when there is no batch
   * yet or a replay is under way; otherwise the seq to replay from.
   */
  beginCatchUp(): bigint | undefined {
    if (this.#lastSeq === undefined || this.#pending) return undefined;
    this.#pending = [];
    return this.#lastSeq + 1n;
  }

  /**
   * A replay's batches (any order), then the live ones held meanwhile: exact again when they
   * continue the mirror without a hole; untrusted otherwise (`resyncFailed`). `null`: the replay
   * could not be had at all (no replay endpoint, timeout).
   */
  replayed(batches: readonly EngineKvEventBatch[] | null): void {
    const held = this.#pending ?? [];
    this.#pending = undefined;
    const sorted = [...(batches ?? []), ...held].sort((a, b) => (a.seq < b.seq ? -1 : 1));
    let next = this.#lastSeq === undefined ? 0n : this.#lastSeq + 1n;
    let hole = batches === null;
    for (const batch of sorted) {
      if (batch.seq < next) continue; // applied already, or both replayed and held
      if (batch.seq > next) {
        hole = true;
        this.#complete = false;
      }
      if (batch.seq === 0n) {
        this.#blocks.clear();
        this.#complete = true;
      }
      this.#apply(batch);
      next = batch.seq + 1n;
    }
    if (hole) this.counters.resyncFailed++;
    else this.counters.resynced++;
  }

  #hold(batch: EngineKvEventBatch, from: bigint): ReceiveResult {
    this.#pending = [batch];
    return { resync: true, from };
  }

  #apply(batch: EngineKvEventBatch): void {
    this.#lastSeq = batch.seq;
    this.counters.batches++;
    for (const event of batch.events) this.#applyEvent(event);
    if (this.#blocks.size > this.#maxBlocks) {
      this.counters.overflows++;
      this.#blocks.clear();
      this.#complete = false;
    }
  }

  #applyEvent(event: EngineKvEvent): void {
    if (event.type === "cleared") {
      // Nothing before it matters any more: the mirror is whole from here on.
      this.#blocks.clear();
      this.#complete = true;
      return;
    }
    if (event.type === "stored" && event.blockSize !== undefined) this.#blockSize = event.blockSize;
    const bit = MEDIUMS.get(event.medium ?? "GPU") ?? OTHER_MEDIUM;
    for (const id of event.blocks) {
      const held = this.#blocks.get(id) ?? 0;
      const now = event.type === "stored" ? held | bit : held & ~bit;
      if (now === 0) this.#blocks.delete(id);
      else this.#blocks.set(id, now);
    }
  }
}
