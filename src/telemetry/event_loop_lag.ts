/**
 * How late the main loop runs a timer: a tick due every `intervalMs` that fires `lag` ms late
 * means the loop was held that long (a long synchronous step, or no CPU). Operators see it as
 * `tidegate_event_loop_lag_seconds`; the hardening tests assert no input holds the loop.
 *
 * Each tick wakes the process, and a wake costs CPU of its own (about 0.2 ms on 2 cores: 10 ms a
 * second at 20 ms, docs/benchmarks.md "Idle"). A router that mostly waits on its engines is
 * measured every `idleIntervalMs`; as soon as the process uses `busyShare` of a core or a tick
 * comes late, every `intervalMs` again.
 */
import type { Timers } from "../cluster/timers.ts";

export interface EventLoopLagOptions {
  /** Monotonic milliseconds. */
  now: () => number;
  timers: Timers;
  /** Called with each tick's lag, in seconds. */
  observe: (lagS: number) => void;
  /** The period while the router works (default 20 ms). */
  intervalMs?: number;
  /** The period while it waits (default 500 ms); used only with `cpuMs`. */
  idleIntervalMs?: number;
  /** The process's CPU time so far in ms, all threads; without it every tick is `intervalMs`. */
  cpuMs?: () => number;
  /** The share of one core from which the router counts as working (default 0.05). */
  busyShare?: number;
}

export class EventLoopLag {
  readonly #options: EventLoopLagOptions;
  readonly #intervalMs: number;
  readonly #idleIntervalMs: number;
  readonly #busyShare: number;
  #handle: unknown;
  #due = 0;
  #maxMs = 0;
  #lastTickMs = 0;
  #lastCpuMs = 0;

  constructor(options: EventLoopLagOptions) {
    this.#options = options;
    this.#intervalMs = options.intervalMs ?? 20;
    this.#idleIntervalMs = options.idleIntervalMs ?? 500;
    this.#busyShare = options.busyShare ?? 0.05;
  }

  /** The largest lag seen since start, in milliseconds. */
  get maxMs(): number {
    return this.#maxMs;
  }

  start(): void {
    if (this.#handle !== undefined) return;
    this.#lastTickMs = this.#options.now();
    this.#lastCpuMs = this.#options.cpuMs?.() ?? 0;
    this.#schedule(this.#intervalMs);
  }

  stop(): void {
    if (this.#handle === undefined) return;
    this.#options.timers.clearTimeout(this.#handle);
    this.#handle = undefined;
  }

  #schedule(ms: number): void {
    this.#due = this.#options.now() + ms;
    this.#handle = this.#options.timers.setTimeout(() => this.#tick(), ms);
  }

  #tick(): void {
    const now = this.#options.now();
    const lagMs = Math.max(0, now - this.#due);
    this.#maxMs = Math.max(this.#maxMs, lagMs);
    this.#options.observe(lagMs / 1000);
    this.#schedule(this.#working(now, lagMs) ? this.#intervalMs : this.#idleIntervalMs);
  }

  /** Whether the process used `busyShare` of a core since the last tick, or this one was late. */
  #working(now: number, lagMs: number): boolean {
    const cpuMs = this.#options.cpuMs;
    if (cpuMs === undefined) return true;
    const cpu = cpuMs();
    const share = (cpu - this.#lastCpuMs) / Math.max(1, now - this.#lastTickMs);
    this.#lastCpuMs = cpu;
    this.#lastTickMs = now;
    return lagMs >= this.#intervalMs || share >= this.#busyShare;
  }
}
