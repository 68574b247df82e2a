/**
 * How late the main loop runs a timer: a tick due every `intervalMs` that fires `lag` ms late
 * means the loop was held that long (a long synchronous step, or no CPU). Operators see it as
 * `tidegate_event_loop_lag_seconds`; the hardening tests assert no input holds the loop.
 */
import type { Timers } from "../cluster/timers.ts";

export interface EventLoopLagOptions {
  /** Monotonic milliseconds. */
  now: () => number;
  timers: Timers;
  /** Called with each tick's lag, in seconds. */
  observe: (lagS: number) => void;
  intervalMs?: number;
}

export class EventLoopLag {
  readonly #options: EventLoopLagOptions;
  readonly #intervalMs: number;
  #handle: unknown;
  #due = 0;
  #maxMs = 0;

  constructor(options: EventLoopLagOptions) {
    this.#options = options;
    this.#intervalMs = options.intervalMs ?? 20;
  }

  /** The largest lag seen since start, in milliseconds. */
  get maxMs(): number {
    return this.#maxMs;
  }

  start(): void {
    if (this.#handle !== undefined) return;
    this.#schedule();
  }

  stop(): void {
    if (this.#handle === undefined) return;
    this.#options.timers.clearTimeout(this.#handle);
    this.#handle = undefined;
  }

  #schedule(): void {
    this.#due = this.#options.now() + this.#intervalMs;
    this.#handle = this.#options.timers.setTimeout(() => this.#tick(), this.#intervalMs);
  }

  #tick(): void {
    const lagMs = Math.max(0, this.#options.now() - this.#due);
    this.#maxMs = Math.max(this.#maxMs, lagMs);
    this.#options.observe(lagMs / 1000);
    this.#schedule();
  }
}
