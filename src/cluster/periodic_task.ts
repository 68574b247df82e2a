/**
 * Runs an async task now and then every `intervalMs`, start to start, never two at once: a round
 * that overruns delays the next one instead of piling up. Edge helper: timers are passed in.
 */
import type { Timers } from "./timers.ts";

export class PeriodicTask {
  readonly #run: () => Promise<void>;
  readonly #intervalMs: number;
  readonly #timers: Timers;
  readonly #now: () => number;
  #timer: unknown;
  #current: Promise<void> | undefined;
  #started = false;

  constructor(run: () => Promise<void>, intervalMs: number, timers: Timers, now: () => number) {
    if (!(intervalMs > 0)) {
      throw new Error(`interval must be a positive number of milliseconds, got ${intervalMs}`);
    }
    this.#run = run;
    this.#intervalMs = intervalMs;
    this.#timers = timers;
    this.#now = now;
  }

  get started(): boolean {
    return this.#started;
  }

  /** Starts the loop with an immediate round. Calling it again does nothing. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#tick();
  }

  /** Stops the loop and waits for a round in progress to end. */
  async stop(): Promise<void> {
    this.#started = false;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#current;
  }

  #tick(): void {
    this.#timer = undefined;
    if (!this.#started) return;
    const began = this.#now();
    this.#current = this.#run()
      .catch(() => {}) // a round reports its own failures; the loop must go on
      .finally(() => {
        this.#current = undefined;
        if (!this.#started) return;
        const wait = Math.max(0, this.#intervalMs - (this.#now() - began));
        this.#timer = this.#timers.setTimeout(() => this.#tick(), wait);
      });
  }
}
