/**
 * A hand-driven clock and timer queue for the cluster edges' tests: `advance(ms)` fires due
 * timers in time order, letting the promise continuations of each run before the next.
 */
import type { Timers } from "../../src/cluster/timers.ts";

/** Lets pending promise continuations (and one real macrotask turn) run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

export class ManualTime implements Timers {
  nowMs: number;
  #timers = new Map<number, { at: number; callback: () => void }>();
  #next = 1;

  constructor(startMs = 0) {
    this.nowMs = startMs;
  }

  now = (): number => this.nowMs;

  setTimeout(callback: () => void, ms: number): number {
    const id = this.#next++;
    this.#timers.set(id, { at: this.nowMs + Math.max(0, ms), callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }

  async advance(ms: number): Promise<void> {
    const target = this.nowMs + ms;
    await settle();
    for (;;) {
      let dueId: number | undefined;
      let dueAt = Infinity;
      for (const [id, timer] of this.#timers) {
        if (timer.at <= target && timer.at < dueAt) {
          dueId = id;
          dueAt = timer.at;
        }
      }
      if (dueId === undefined) break;
      const timer = this.#timers.get(dueId)!;
      this.#timers.delete(dueId);
      this.nowMs = Math.max(this.nowMs, timer.at);
      timer.callback();
      await settle();
    }
    this.nowMs = target;
  }
}
