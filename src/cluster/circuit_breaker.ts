/**
 * One instance's circuit breaker. Pure: the clock is passed in, signals come from the health
 * prober (probes) and the proxy (request permits).
 *
 *   starting ──healthy probe──► closed            (an engine still loading answers /health 503)
 *   closed ──N consecutive failures──► open       (connect errors, 5xx, timeouts; N = failureThreshold)
 *   open ──cool-down elapsed, or a healthy probe──► half_open
 *   half_open: exactly one trial request at a time; a failure ──► open,
 *              successThreshold consecutive successes (probes or trials) ──► closed
 *
 * A failure while open restarts the cool-down: probes that keep failing keep traffic away. Request
 * outcomes that report after the breaker opened again are ignored (they describe an older episode).
 */

export type BreakerState = "starting" | "closed" | "open" | "half_open";

export type FailureKind = "connect" | "timeout" | "http_5xx" | "unready" | "other";

export type SignalSource = "probe" | "request";

export type ProbeOutcome = "healthy" | "starting" | "failed";

export interface CircuitBreakerOptions {
  now: () => number;
  /** Consecutive failures that open a closed breaker (default 3). */
  failureThreshold?: number;
  /** Consecutive successes in half_open that close it (default 2). */
  successThreshold?: number;
  /** Time an open breaker waits before allowing a trial (default 10 s). */
  coolDownMs?: number;
  /** A trial that has not reported after this long frees its slot for another (default 30 s). */
  trialTimeoutMs?: number;
  /** "closed" (default) trusts the instance until it fails; "starting" waits for a healthy probe. */
  initialState?: "closed" | "starting";
  /**
   * A closed breaker that has never seen a success moves to starting when a probe answers 503:
   * an engine still loading its weights at the router's start gets no traffic (default false:
   * the 503 counts as a failure, as from an instance that has served).
   */
  startingWhileUnproven?: boolean;
  onStateChange?: (change: { from: BreakerState; to: BreakerState; reason: string }) => void;
}

/** Permission to send one request; report its outcome once (later calls do nothing). */
export interface BreakerPermit {
  /** The half-open trial request. */
  readonly trial: boolean;
  /** The instance answered usefully (first byte or a complete non-5xx answer). */
  success(): void;
  failure(kind: FailureKind, detail?: string): void;
  /** Ended without a verdict (client abort, 4xx): frees a trial slot, counts nothing. */
  release(): void;
}

export interface BreakerCounters {
  successes: number;
  failures: number;
  probeFailures: number;
  requestFailures: number;
  /** Times the breaker opened. */
  opened: number;
  trials: number;
  /** tryAcquire() calls refused. */
  rejected: number;
}

export interface BreakerSnapshot {
  state: BreakerState;
  /** A request may be sent now. */
  available: boolean;
  consecutiveFailures: number;
  consecutiveSuccesses: number;
  trialInFlight: boolean;
  openedAtMs?: number;
  /** The last failure, with what went wrong (`detail`: the error, with the URL when known). */
  lastFailure?: { kind: FailureKind; source: SignalSource; atMs: number; detail?: string };
  counters: BreakerCounters;
}

export class CircuitBreaker {
  readonly #now: () => number;
  readonly #failureThreshold: number;
  readonly #successThreshold: number;
  readonly #coolDownMs: number;
  readonly #trialTimeoutMs: number;
  readonly #onStateChange: CircuitBreakerOptions["onStateChange"];
  readonly #startingWhileUnproven: boolean;
  #state: BreakerState;
  #consecutiveFailures = 0;
  #consecutiveSuccesses = 0;
  #openedAtMs: number | undefined;
  #trialStartedAtMs: number | undefined;
  #trialId = 0;
  /** Bumped each time the breaker opens: permits from an older episode are ignored. */
  #episode = 0;
  #lastFailure: BreakerSnapshot["lastFailure"];
  readonly #counters: BreakerCounters = {
    successes: 0,
    failures: 0,
    probeFailures: 0,
    requestFailures: 0,
    opened: 0,
    trials: 0,
    rejected: 0,
  };

  constructor(options: CircuitBreakerOptions) {
    this.#now = options.now;
    this.#failureThreshold = Math.max(1, options.failureThreshold ?? 3);
    this.#successThreshold = Math.max(1, options.successThreshold ?? 2);
    this.#coolDownMs = options.coolDownMs ?? 10_000;
    this.#trialTimeoutMs = options.trialTimeoutMs ?? 30_000;
    this.#onStateChange = options.onStateChange;
    this.#startingWhileUnproven = options.startingWhileUnproven ?? false;
    this.#state = options.initialState ?? "closed";
  }

  /** The state now (an open breaker whose cool-down has elapsed reads as half_open). */
  get state(): BreakerState {
    this.#advance();
    return this.#state;
  }

  /** A request may be sent now: closed, or half_open with no trial in flight. */
  get available(): boolean {
    this.#advance();
    if (this.#state === "closed") return true;
    return this.#state === "half_open" && this.#trialStartedAtMs === undefined;
  }

  /** Asks to send one request. In half_open only one permit (the trial) is out at a time. */
  tryAcquire(): BreakerPermit | undefined {
    if (!this.available) {
      this.#counters.rejected++;
      return undefined;
    }
    const episode = this.#episode;
    let trialId: number | undefined;
    if (this.#state === "half_open") {
      trialId = ++this.#trialId;
      this.#trialStartedAtMs = this.#now();
      this.#counters.trials++;
    }
    let settled = false;
    const settle = (verdict: () => void) => {
      if (settled) return;
      settled = true;
      if (trialId !== undefined && trialId === this.#trialId) this.#trialStartedAtMs = undefined;
      if (episode === this.#episode) verdict();
    };
    return {
      trial: trialId !== undefined,
      success: () => settle(() => this.recordSuccess("request")),
      failure: (kind, detail) => settle(() => this.recordFailure("request", kind, detail)),
      release: () => settle(() => {}),
    };
  }

  recordSuccess(_source: SignalSource): void {
    this.#advance();
    this.#counters.successes++;
    this.#consecutiveFailures = 0;
    switch (this.#state) {
      case "starting":
        this.#to("closed", "healthy after starting");
        break;
      case "closed":
        break;
      case "open":
        this.#consecutiveSuccesses = 1;
        this.#to("half_open", "a probe passed");
        this.#maybeClose();
        break;
      case "half_open":
        this.#consecutiveSuccesses++;
        this.#maybeClose();
        break;
    }
  }

  recordFailure(source: SignalSource, kind: FailureKind, detail?: string): void {
    this.#advance();
    const now = this.#now();
    this.#counters.failures++;
    if (source === "probe") this.#counters.probeFailures++;
    else this.#counters.requestFailures++;
    this.#lastFailure = { kind, source, atMs: now, ...(detail ? { detail } : {}) };
    const last = `${source} ${kind}${detail ? `: ${detail}` : ""}`;
    this.#consecutiveSuccesses = 0;
    this.#consecutiveFailures++;
    switch (this.#state) {
      case "starting":
        break;
      case "closed":
        if (this.#consecutiveFailures >= this.#failureThreshold) {
          this.#open(`${this.#consecutiveFailures} consecutive failures (last: ${last})`);
        }
        break;
      case "half_open":
        this.#open(`failed in half_open (${last})`);
        break;
      case "open":
        this.#openedAtMs = now; // still failing: restart the cool-down
        break;
    }
  }

  /** Feeds one health-probe result (health_prober.ts). A 503 while starting keeps it starting. */
  recordProbe(result: { outcome: ProbeOutcome; failure?: FailureKind; error?: string }): void {
    if (result.outcome === "healthy") this.recordSuccess("probe");
    else if (result.outcome === "starting" && this.state === "starting") {
      this.#consecutiveSuccesses = 0;
    } else if (
      result.outcome === "starting" && this.#startingWhileUnproven && this.state === "closed" &&
      this.#counters.successes === 0
    ) {
      this.#to("starting", "/health says starting and it never served");
    } else {
      this.recordFailure(
        "probe",
        result.outcome === "starting" ? "unready" : result.failure ?? "other",
        result.error,
      );
    }
  }

  snapshot(): BreakerSnapshot {
    const snapshot: BreakerSnapshot = {
      state: this.state,
      available: this.available,
      consecutiveFailures: this.#consecutiveFailures,
      consecutiveSuccesses: this.#consecutiveSuccesses,
      trialInFlight: this.#trialStartedAtMs !== undefined,
      counters: { ...this.#counters },
    };
    if (this.#openedAtMs !== undefined) snapshot.openedAtMs = this.#openedAtMs;
    if (this.#lastFailure) snapshot.lastFailure = { ...this.#lastFailure };
    return snapshot;
  }

  #advance(): void {
    const now = this.#now();
    if (this.#state === "open" && now - this.#openedAtMs! >= this.#coolDownMs) {
      this.#consecutiveSuccesses = 0;
      this.#to("half_open", "cool-down elapsed");
    }
    if (
      this.#trialStartedAtMs !== undefined && now - this.#trialStartedAtMs >= this.#trialTimeoutMs
    ) {
      this.#trialStartedAtMs = undefined; // the trial never reported: let another one try
    }
  }

  #maybeClose(): void {
    if (this.#consecutiveSuccesses >= this.#successThreshold) {
      this.#to("closed", `${this.#consecutiveSuccesses} consecutive successes`);
    }
  }

  #open(reason: string): void {
    this.#openedAtMs = this.#now();
    this.#episode++;
    this.#counters.opened++;
    this.#to("open", reason);
  }

  #to(state: BreakerState, reason: string): void {
    const from = this.#state;
    this.#state = state;
    this.#trialStartedAtMs = undefined;
    if (state === "closed") {
      this.#consecutiveFailures = 0;
      this.#consecutiveSuccesses = 0;
      this.#openedAtMs = undefined;
    }
    if (from !== state) this.#onStateChange?.({ from, to: state, reason });
  }
}
