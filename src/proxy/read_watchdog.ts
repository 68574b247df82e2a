import type { ChunkReader } from "./chunk_reader.ts";

/** The watchdog's clock: the time in ms and timers (a test drives them by hand). */
export interface WatchdogClock {
  now(): number;
  /** Returns a handle that `clearTimeout` accepts. */
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const SYSTEM_CLOCK: WatchdogClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as number),
};

/** How long an engine may stay silent, and how long a whole answer may take. */
export interface BodyLimits {
  idleTimeoutMs: number;
  maxDurationMs: number;
  /** Ends the answer at once, erroring with the signal's reason (the router shutting down). */
  abort?: AbortSignal;
}

/** The engine went silent past `idleTimeoutMs`, or the answer outlasted `maxDurationMs`. */
export class UpstreamStalledError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamStalledError";
  }
}

/** Timers take at most 2^31-1 ms; a longer limit is checked again when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Reads a body with each read bounded by the idle timeout and all of them by the answer's
 * deadline, using one timer for the whole body rather than a timer, a race and an abort listener
 * per read (a streamed answer is read once per token; docs/benchmarks.md, "Streamed answers, per
 * chunk"). The timer is re-armed only when it fires while a later read is pending; a stop cancels
 * the reader, which ends the pending read, and that read then throws the stop's reason. Call
 * `dispose` once the body is done.
 */
export class ReadWatchdog {
  readonly #reader: ChunkReader;
  readonly #limits: BodyLimits;
  readonly #endBy: number;
  #readingSince: number | undefined;
  readonly #clock: WatchdogClock;
  #timer: unknown;
  #stopped: { reason: unknown } | undefined;
  #disposed = false;
  readonly #onAbort = () => this.#stop(this.#limits.abort?.reason);

  constructor(
    reader: ChunkReader,
    limits: BodyLimits,
    clock: WatchdogClock = SYSTEM_CLOCK,
  ) {
    this.#reader = reader;
    this.#limits = limits;
    this.#clock = clock;
    this.#endBy = clock.now() + limits.maxDurationMs;
    if (limits.abort?.aborted) this.#onAbort();
    else limits.abort?.addEventListener("abort", this.#onAbort, { once: true });
  }

  async read(): Promise<ReadableStreamReadResult<Uint8Array>> {
    const now = this.#clock.now();
    // An engine whose data is always there when asked never lets a timer fire: check here too.
    if (now >= this.#endBy) this.#stop(this.#tookTooLong());
    this.#throwIfStopped();
    this.#readingSince = now;
    if (!this.#disposed) this.#timer ??= this.#arm(this.#readingSince);
    let result: ReadableStreamReadResult<Uint8Array>;
    try {
      result = await this.#reader.read();
    } finally {
      this.#readingSince = undefined;
    }
    this.#throwIfStopped();
    return result;
  }

  #throwIfStopped(): void {
    if (this.#stopped) throw this.#stopped.reason;
  }

  dispose(): void {
    this.#disposed = true;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#limits.abort?.removeEventListener("abort", this.#onAbort);
  }

  /** A timer for the earlier of the pending read's idle limit and the answer's deadline. */
  #arm(readingSince: number): unknown {
    const at = Math.min(readingSince + this.#limits.idleTimeoutMs, this.#endBy);
    const delayMs = Math.min(MAX_TIMER_MS, Math.max(0, at - this.#clock.now()));
    return this.#clock.setTimeout(() => this.#check(), delayMs);
  }

  #check(): void {
    this.#timer = undefined;
    const since = this.#readingSince;
    if (since === undefined || this.#stopped) return; // the next read arms it again
    const now = this.#clock.now();
    if (now >= this.#endBy) this.#stop(this.#tookTooLong());
    else if (now - since >= this.#limits.idleTimeoutMs) {
      this.#stop(
        new UpstreamStalledError(
          `the engine sent nothing for ${this.#limits.idleTimeoutMs} ms`,
        ),
      );
    } else this.#timer = this.#arm(since);
  }

  #tookTooLong(): UpstreamStalledError {
    return new UpstreamStalledError(`the answer took longer than ${this.#limits.maxDurationMs} ms`);
  }

  #stop(reason: unknown): void {
    if (this.#stopped) return;
    this.#stopped = { reason };
    this.dispose();
    this.#reader.cancel(reason).catch(() => {});
  }
}
