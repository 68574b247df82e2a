import type { EngineKvEvent, EngineKvEventBatch } from "./engine_kv_event.ts";

/**
 * One engine's own prefix cache, mirrored from its KV events (src/kv/events/engine_kv_event.ts):
 * which blocks it holds, on any medium (GPU, or CPU with offloading). The mirror is exact only
 * while it has seen every batch since a point where it knew the whole cache: the publisher's
 * first batch (seq 0), or an `AllBlocksCleared`. A gap in sequence numbers (a slow consumer's
 * dropped messages), a publisher that restarts mid-history or an overflow makes it `untrusted`:
 * it answers nothing (the router then counts what the store and its own dispatches say) until a
 * replay from the publisher's buffer fills the gap or the cache is cleared.
 *
 * A lost connection makes it untrusted too: the publisher met on reconnecting may be a restarted
 * engine whose numbering continues where the old one's stopped. A replay from the mirror's last
 * batch tells: the same publisher still has that batch, with the same timestamp; a restarted one
 * has nothing from that number on, or another batch under it, and the mirror is rebuilt from the
 * new publisher's whole buffer. Pure: no I/O, no clock; src/runtime/engine_event_feed.ts feeds it.
 */
export type EngineIndexState = "exact" | "untrusted";

export interface EngineIndexCounters {
  /** Batches applied (live or replayed). */
  batches: number;
  /** Sequence gaps seen (live messages lost). */
  gaps: number;
  /** The publisher started again (the engine restarted): the mirror was emptied. */
  restarts: number;
  /** Replays that filled a gap, and those that could not (the publisher's buffer had moved on). */
  resynced: number;
  resyncFailed: number;
  /** Times the mirror grew past `maxBlocks` and was dropped. */
  overflows: number;
  /** Live batches dropped while a replay was under way (beyond `maxPending`). */
  droppedPending: number;
  /** Connections to the publisher lost. */
  disconnects: number;
  /** Live batches a replay had applied already (the live copy came later). */
  duplicates: number;
}

/** What the feed should do after a live batch: nothing, or ask for a replay from `from`. */
export type ReceiveResult = { resync: false } | { resync: true; from: bigint };

/** How many recent batches' timestamps are kept to recognise a live copy of a replayed one. */
const RECENT_BATCHES = 4096;
const RECENT_BATCHES_BIG = BigInt(RECENT_BATCHES);

/** Where a batch's timestamp is kept among the recent ones. */
function recentSlot(seq: bigint): number {
  return Number(seq % RECENT_BATCHES_BIG);
}
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
  #lastTs: number | undefined;
  /** The timestamps of the latest batches applied, at their seq modulo `RECENT_BATCHES`. */
  readonly #recentTs = new Float64Array(RECENT_BATCHES).fill(NaN);
  /** The mirror follows the publisher connected now (false from a disconnect to a replay). */
  #confirmed = true;
  /** Disconnects so far: a replay begun before the latest one confirms nothing. */
  #connection = 0;
  /** Live batches held while a replay is under way. */
  #pending: EngineKvEventBatch[] | undefined;
  /** The replay under way: when it began, and the batch it must show again, for a catch-up. */
  #replay: { connection: number; anchor?: { seq: bigint; ts?: number } } | undefined;
  readonly counters: EngineIndexCounters = {
    batches: 0,
    gaps: 0,
    restarts: 0,
    resynced: 0,
    resyncFailed: 0,
    overflows: 0,
    droppedPending: 0,
    disconnects: 0,
    duplicates: 0,
  };

  constructor(options: { maxBlocks?: number; maxPending?: number } = {}) {
    this.#maxBlocks = options.maxBlocks ?? 1_000_000;
    this.#maxPending = options.maxPending ?? 10_000;
  }

  get state(): EngineIndexState {
    const whole = this.#complete && this.#confirmed && this.#pending === undefined;
    return whole ? "exact" : "untrusted";
  }

  get size(): number {
    return this.#blocks.size;
  }

  /** The engine's block size, from its last BlockStored event (undefined before one). */
  get blockSize(): number | undefined {
    return this.#blockSize;
  }

  #blockSize: number | undefined;

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
      this.#confirmed = true;
      this.#apply(batch);
      return { resync: false };
    }
    if (last !== undefined && batch.seq === last + 1n) {
      this.#apply(batch);
      if (batch.events.some((event) => event.type === "cleared")) this.#confirmed = true;
      return { resync: false };
    }
    if (last !== undefined && batch.seq > last) {
      this.counters.gaps++;
      return this.#hold(batch, this.#beginCatchUp(last));
    }
    if (last !== undefined && this.#appliedAlready(batch, last)) {
      this.counters.duplicates++;
      return { resync: false };
    }
    // Joined mid-history, or the publisher restarted and its start was missed.
    if (last !== undefined) this.counters.restarts++;
    return this.#hold(batch, this.#beginFullResync());
  }

  /** The subscription lost the publisher: untrusted until a replay shows whom it meets next. */
  disconnected(): void {
    this.#connection++;
    this.#confirmed = false;
    this.counters.disconnects++;
  }

  /**
   * Begins a replay: from the last batch applied while the mirror is whole (messages lost at the
   * end of a run, which no later message shows, or while disconnected; and whether the publisher
   * is still the same), of the publisher's whole buffer otherwise. Returns the seq to replay
   * from; undefined while a replay is under way.
   */
  beginResync(): bigint | undefined {
    if (this.#pending) return undefined;
    const last = this.#lastSeq;
    return this.#complete && last !== undefined
      ? this.#beginCatchUp(last)
      : this.#beginFullResync();
  }

  /**
   * A replay's batches (any order), then the live ones held meanwhile: exact again when they
   * continue the mirror without a hole; untrusted otherwise (`resyncFailed`). `null`: the replay
   * could not be had at all (no replay endpoint, timeout). When a catch-up shows another
   * publisher, the mirror is emptied and the answer asks for its whole buffer.
   */
  replayed(batches: readonly EngineKvEventBatch[] | null): ReceiveResult {
    const held = this.#pending ?? [];
    const began = this.#replay;
    this.#pending = undefined;
    this.#replay = undefined;
    if (batches !== null && began?.anchor && restartedSince(began.anchor, batches)) {
      this.counters.restarts++;
      const from = this.#beginFullResync();
      this.#pending!.push(...held);
      return { resync: true, from };
    }
    this.#applyReplay(batches, held);
    if (began?.connection !== this.#connection) this.#confirmed = false;
    else if (batches !== null) this.#confirmed = true;
    return { resync: false };
  }

  #applyReplay(
    batches: readonly EngineKvEventBatch[] | null,
    held: readonly EngineKvEventBatch[],
  ): void {
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

  /** Forgets the mirror and asks for the publisher's whole buffer, from seq 0. */
  #beginFullResync(): bigint {
    this.#blocks.clear();
    this.#complete = false;
    this.#lastSeq = undefined;
    this.#lastTs = undefined;
    this.#pending ??= [];
    this.#replay = { connection: this.#connection };
    return 0n;
  }

  /** Asks for the publisher's buffer from the mirror's last batch on, that batch included. */
  #beginCatchUp(last: bigint): bigint {
    this.#pending ??= [];
    this.#replay = { connection: this.#connection, anchor: { seq: last, ts: this.#lastTs } };
    return last;
  }

  #hold(batch: EngineKvEventBatch, from: bigint): ReceiveResult {
    this.#pending!.push(batch);
    return { resync: true, from };
  }

  /** The very batch (same number, same timestamp) was applied, from a replay. */
  #appliedAlready(batch: EngineKvEventBatch, last: bigint): boolean {
    if (batch.ts === undefined || last - batch.seq >= RECENT_BATCHES_BIG) return false;
    return this.#recentTs[recentSlot(batch.seq)] === batch.ts;
  }

  #apply(batch: EngineKvEventBatch): void {
    this.#lastSeq = batch.seq;
    this.#lastTs = batch.ts;
    this.#recentTs[recentSlot(batch.seq)] = batch.ts ?? NaN;
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

/**
 * A catch-up's answer comes from another publisher than the mirror's last batch: it has nothing
 * from that batch's number on (a publisher keeps its latest batches), or another batch under it.
 */
function restartedSince(
  anchor: { seq: bigint; ts?: number },
  batches: readonly EngineKvEventBatch[],
): boolean {
  if (batches.length === 0) return true;
  const again = batches.find((batch) => batch.seq === anchor.seq);
  return again !== undefined && again.ts !== anchor.ts;
}
