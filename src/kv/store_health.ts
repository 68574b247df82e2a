/**
 * Whether to ask the store at all (docs/compat.md §5). Llumnix marks the store "down" for 30 s after a
 * lookup fails entirely and dispatches on load alone meanwhile; we do the same, then let a single
 * probe lookup decide whether the store is back.
 *
 * Deadlines count too: a store that hangs costs every request its full deadline. One miss can be
 * a GC pause or a burst, so the window opens after `deadlinesToOpen` consecutive misses (default
 * 3): a hanging store then costs at most that many deadlines in a row before lookups stop.
 * A probe that misses its deadline re-opens the window at once.
 *
 * Pure: every call takes the time (ms, any monotonic origin) from the caller.
 */

export type StoreState = "up" | "down" | "probing";

/** What to do with the next lookup: send it, send it as the single probe, or skip it. */
export type Admission = "send" | "probe" | "skip";

export interface StoreHealthOptions {
  /** How long lookups are skipped after the store is marked down (default 30 000 ms). */
  downWindowMs?: number;
  /** Consecutive failed lookups that mark the store down (default 1, as Llumnix). */
  failuresToOpen?: number;
  /** Consecutive deadline misses that mark the store down (default 3). */
  deadlinesToOpen?: number;
  /** A probe not reported back within this long is forgotten and another is allowed (default 10 000 ms). */
  probeStaleMs?: number;
  /** Told when the store goes down (with the error that took it there) and when it is back. */
  onChange?: (change: { state: "down" | "up"; error?: string }) => void;
}

export interface StoreHealthSnapshot {
  state: StoreState;
  consecutiveFailures: number;
  consecutiveDeadlines: number;
  /** When the current down-window ends (ms, caller's clock), if down. */
  downUntil?: number;
  lastError?: string;
  successes: number;
  failures: number;
  deadlines: number;
  /** Lookups not sent because the store was down. */
  skipped: number;
  probes: number;
  /** Transitions into "down" (including a failed probe re-opening the window). */
  markedDown: number;
  /** Transitions back to "up". */
  recovered: number;
}

export class StoreHealth {
  readonly #downWindowMs: number;
  readonly #failuresToOpen: number;
  readonly #deadlinesToOpen: number;
  readonly #probeStaleMs: number;
  readonly #onChange: StoreHealthOptions["onChange"];

  #state: StoreState = "up";
  #downUntil = 0;
  #probeStartedAt = 0;
  #consecutiveFailures = 0;
  #consecutiveDeadlines = 0;
  #lastError: string | undefined;
  #successes = 0;
  #failures = 0;
  #deadlines = 0;
  #skipped = 0;
  #probes = 0;
  #markedDown = 0;
  #recovered = 0;

  constructor(options: StoreHealthOptions = {}) {
    this.#downWindowMs = nonNegative(options.downWindowMs, 30_000);
    this.#onChange = options.onChange;
    this.#failuresToOpen = atLeastOne(options.failuresToOpen, 1);
    this.#deadlinesToOpen = atLeastOne(options.deadlinesToOpen, 3);
    this.#probeStaleMs = nonNegative(options.probeStaleMs, 10_000);
  }

  /** Decide for one lookup about to start. "probe" is handed out once per window. */
  admit(now: number): Admission {
    if (this.#state === "up") return "send";
    const probeFree = this.#state === "down"
      ? now >= this.#downUntil
      : now - this.#probeStartedAt >= this.#probeStaleMs;
    if (probeFree) {
      this.#state = "probing";
      this.#probeStartedAt = now;
      this.#probes++;
      return "probe";
    }
    this.#skipped++;
    return "skip";
  }

  /**
   * The lookup got an answer (from at least part of its batches). `probe` says whether it was the
   * lookup `admit` answered "probe" for: only the probe's report ends a probing state.
   */
  recordSuccess(_now: number, probe = false): void {
    this.#successes++;
    this.#consecutiveFailures = 0;
    this.#consecutiveDeadlines = 0;
    // A late answer to a lookup sent before the window opened does not close it: only a probe does.
    if (this.#state === "probing" && probe) {
      this.#state = "up";
      this.#recovered++;
      this.#onChange?.({ state: "up" });
    }
  }

  /**
   * Every attempt of the lookup failed (refused, non-200, 503 standby, garbage). Late reports from
   * lookups sent before the window opened neither extend nor close it.
   */
  recordFailure(now: number, error: string, probe = false): void {
    this.#failures++;
    this.#consecutiveFailures++;
    this.#consecutiveDeadlines = 0;
    this.#lastError = error;
    if (this.#state === "probing" && probe) this.#open(now);
    else if (this.#state === "up" && this.#consecutiveFailures >= this.#failuresToOpen) {
      this.#open(now);
    }
  }

  /** The lookup's deadline passed before it had every answer. */
  recordDeadline(now: number, probe = false): void {
    this.#deadlines++;
    this.#consecutiveDeadlines++;
    this.#lastError = "lookup deadline exceeded";
    if (this.#state === "probing" && probe) this.#open(now);
    else if (this.#state === "up" && this.#consecutiveDeadlines >= this.#deadlinesToOpen) {
      this.#open(now);
    }
  }

  /** The caller gave up on the lookup (its own signal): says nothing about the store. */
  recordAbandoned(now: number, probe = false): void {
    // A probe that was abandoned must not block the next one for `probeStaleMs`.
    if (this.#state === "probing" && probe) {
      this.#state = "down";
      this.#downUntil = now;
    }
  }

  /**
   * Word from outside the lookups that the store serves again (a different HA master now says it
   * serves): the down-window ends now, so the next lookup is the probe that decides.
   */
  endWindow(now: number): void {
    if (this.#state === "down" && this.#downUntil > now) this.#downUntil = now;
  }

  get state(): StoreState {
    return this.#state;
  }

  get consecutiveFailures(): number {
    return this.#consecutiveFailures;
  }

  get consecutiveDeadlines(): number {
    return this.#consecutiveDeadlines;
  }

  get downUntil(): number | undefined {
    return this.#state === "up" ? undefined : this.#downUntil;
  }

  get lastError(): string | undefined {
    return this.#lastError;
  }

  snapshot(): StoreHealthSnapshot {
    const snapshot: StoreHealthSnapshot = {
      state: this.#state,
      consecutiveFailures: this.#consecutiveFailures,
      consecutiveDeadlines: this.#consecutiveDeadlines,
      successes: this.#successes,
      failures: this.#failures,
      deadlines: this.#deadlines,
      skipped: this.#skipped,
      probes: this.#probes,
      markedDown: this.#markedDown,
      recovered: this.#recovered,
    };
    if (this.#state !== "up") snapshot.downUntil = this.#downUntil;
    if (this.#lastError !== undefined) snapshot.lastError = this.#lastError;
    return snapshot;
  }

  #open(now: number): void {
    // A failed probe re-opens the window; only the first fall is news.
    if (this.#state === "up") this.#onChange?.({ state: "down", error: this.#lastError });
    this.#state = "down";
    this.#downUntil = now + this.#downWindowMs;
    this.#markedDown++;
  }
}

function nonNegative(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= 0 ? value : fallback;
}

function atLeastOne(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback;
}
