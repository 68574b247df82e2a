import type { KeyLocation, KvIndex, LookupResult } from "./types.ts";
import {
  batchQueryUrl,
  isPlainStoreKey,
  splitIntoBatches,
  storeKeyProblem,
} from "./mooncake_request.ts";
import { parseBatchQueryKeysResponse } from "./mooncake_response.ts";
import { StoreHealth } from "./store_health.ts";

/**
 * Asks a Mooncake master where keys live (docs/compat.md §4-5): one logical
 * `GET /batch_query_keys?keys=...` cut into batches sent concurrently, retried inside one
 * per-lookup deadline, gated by `StoreHealth`. Fails open: it never throws, and whatever
 * answered before the deadline is returned.
 */
export interface MooncakeClientOptions {
  /** The master's admin base URL (its `--metrics_port`, default 9003), e.g. `http://10.0.0.2:9003`. */
  url: string;
  fetch?: typeof fetch;
  /** Milliseconds on a monotonic clock (default `performance.now`). */
  now?: () => number;
  /** Shared health gate; one is created with default settings when omitted. */
  health?: StoreHealth;
  /** Keys per request (default 128: ~9 KB of URL with 66-character keys). */
  batchSize?: number;
  /** Default per-lookup deadline (50 ms). */
  deadlineMs?: number;
  /** Attempts per batch, all inside the deadline (default 3; Llumnix does 5 over seconds). */
  maxAttempts?: number;
  /** Pause between attempts of one batch (default 5 ms). */
  retryBackoffMs?: number;
}

type BatchOutcome =
  | { kind: "answered" }
  | { kind: "failed"; error: string }
  | { kind: "aborted" };

interface LookupRun {
  attempts: number;
  errors: string[];
  locations: Map<string, KeyLocation>;
}

/** A lookup's result before `keysQueried` and `elapsedMs` are filled in. */
type LookupOutcome = Omit<LookupResult, "keysQueried" | "elapsedMs">;

interface SentBatches {
  batches: number;
  /** Per batch; undefined where the deadline or the caller's abort came first. */
  outcomes: (BatchOutcome | undefined)[];
  run: LookupRun;
  timedOut: boolean;
  /** How late the deadline's timer fired: the router's own event loop was that busy. */
  lateMs: number;
}

/**
 * A deadline timer this late means the router's event loop, not the store, was slow (answers
 * may sit unread behind other work): such a miss does not count towards the down-window.
 */
export function routerWasBusy(lateMs: number, deadlineMs: number): boolean {
  return lateMs > Math.max(5, deadlineMs / 2);
}

/** An attempt needs at least this much time left to be worth starting. */
const MIN_ATTEMPT_MS = 2;

export class MooncakeClient implements KvIndex {
  readonly #url: string;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #health: StoreHealth;
  readonly #batchSize: number;
  readonly #deadlineMs: number;
  readonly #maxAttempts: number;
  readonly #retryBackoffMs: number;

  constructor(options: MooncakeClientOptions) {
    this.#url = options.url;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#now = options.now ?? (() => performance.now());
    this.#health = options.health ?? new StoreHealth();
    this.#batchSize = positiveInt(options.batchSize, 128);
    this.#deadlineMs = positive(options.deadlineMs, 50);
    this.#maxAttempts = positiveInt(options.maxAttempts, 3);
    this.#retryBackoffMs = Math.max(0, options.retryBackoffMs ?? 5);
  }

  get health(): StoreHealth {
    return this.#health;
  }

  get url(): string {
    return this.#url;
  }

  async lookup(
    keys: string[],
    options: { deadlineMs?: number; signal?: AbortSignal } = {},
  ): Promise<LookupResult> {
    const started = this.#now();
    const unique = [...new Set(keys)];
    const finish = (partial: LookupOutcome): LookupResult => ({
      ...partial,
      keysQueried: unique.length,
      elapsedMs: Math.max(0, this.#now() - started),
    });
    const admission = this.#admit(unique, started, options.signal);
    if ("refused" in admission) return finish(admission.refused);
    const deadlineMs = positive(options.deadlineMs, this.#deadlineMs);
    return finish(await this.#query(unique, started, deadlineMs, admission.probe, options.signal));
  }

  /**
   * Why no request is sent (no keys, a key the master cannot read, an aborted caller, a store
   * marked down), or whether the request is the health gate's probe.
   */
  #admit(
    unique: readonly string[],
    started: number,
    signal: AbortSignal | undefined,
  ): { refused: LookupOutcome } | { probe: boolean } {
    const empty = { locations: new Map<string, KeyLocation>(), batches: 0, attempts: 0 };
    if (unique.length === 0) return { refused: { outcome: "skipped", ...empty } };
    for (const key of unique) {
      const problem = storeKeyProblem(key);
      // A key the master cannot read is our configuration's fault, not the store's: no request.
      if (problem !== undefined) {
        return { refused: { outcome: "failed", ...empty, error: problem } };
      }
    }
    if (signal?.aborted) {
      return { refused: { outcome: "deadline", ...empty, error: "lookup aborted by the caller" } };
    }
    const admission = this.#health.admit(started);
    if (admission === "skip") {
      const until = this.#health.downUntil ?? started;
      const reason = this.#health.lastError ?? "earlier lookups failed";
      return {
        refused: {
          outcome: "store_down",
          ...empty,
          error: `store marked down for another ${Math.max(0, Math.round(until - started))} ms ` +
            `(${reason}); dispatching on load only`,
        },
      };
    }
    return { probe: admission === "probe" };
  }

  /**
   * Sends every batch concurrently and waits for all of them, the deadline or the caller's abort;
   * judged at once, so answers arriving after that are not counted.
   */
  async #query(
    unique: string[],
    started: number,
    deadlineMs: number,
    probe: boolean,
    signal: AbortSignal | undefined,
  ): Promise<LookupOutcome> {
    const deadlineAt = started + deadlineMs;
    const controller = new AbortController();
    let timedOut = false;
    let lateMs = 0;
    const timer = setTimeout(() => {
      timedOut = true;
      lateMs = Math.max(0, this.#now() - deadlineAt);
      controller.abort();
    }, deadlineMs);
    const onCallerAbort = () => controller.abort();
    signal?.addEventListener("abort", onCallerAbort, { once: true });

    const batches = splitIntoBatches(unique, this.#batchSize);
    const run: LookupRun = { attempts: 0, errors: [], locations: new Map() };
    const outcomes: (BatchOutcome | undefined)[] = batches.map(() => undefined);
    const all = Promise.all(
      batches.map(async (batch, i) => {
        outcomes[i] = await this.#runBatch(batch, controller.signal, deadlineAt, run);
      }),
    );
    await Promise.race([all, abortedPromise(controller.signal)]);
    clearTimeout(timer);
    signal?.removeEventListener("abort", onCallerAbort);
    // Stragglers (deadline or caller abort) are cancelled; their late answers are dropped.
    if (outcomes.includes(undefined)) controller.abort();
    const sent = { batches: batches.length, outcomes, run, timedOut, lateMs };
    return this.#judge(sent, deadlineMs, probe);
  }

  /** The lookup's outcome from its batches' outcomes; tells the health gate how the store did. */
  #judge(sent: SentBatches, deadlineMs: number, probe: boolean): LookupOutcome {
    const { batches, outcomes, run, timedOut } = sent;
    const now = this.#now();
    const answered = outcomes.filter((o) => o?.kind === "answered").length;
    const failed = outcomes.filter((o) => o?.kind === "failed").length;
    const settled = answered + failed === batches;
    const base = { locations: run.locations, batches, attempts: run.attempts };

    if (!settled && !timedOut) {
      this.#health.recordAbandoned(now, probe);
      return { outcome: "deadline", ...base, error: "lookup aborted by the caller" };
    }
    if (!settled) return this.#missedDeadline(sent, deadlineMs, probe, now);
    if (failed === 0) {
      this.#health.recordSuccess(now, probe);
      return { outcome: "ok", ...base };
    }
    const firstError = run.errors[0] ?? "unknown error";
    if (answered === 0) {
      this.#health.recordFailure(now, firstError, probe);
      return {
        outcome: "failed",
        ...base,
        error: `every attempt failed (${run.attempts} over ${batches} batches): ${firstError}`,
      };
    }
    // The store answers, so it is not down; the failed batches' keys are simply unanswered.
    this.#health.recordSuccess(now, probe);
    return {
      outcome: "failed",
      ...base,
      error: `${failed} of ${batches} batches failed: ${firstError}`,
    };
  }

  #missedDeadline(
    sent: SentBatches,
    deadlineMs: number,
    probe: boolean,
    now: number,
  ): LookupOutcome {
    const { batches, outcomes, run, lateMs } = sent;
    const answered = outcomes.filter((o) => o?.kind === "answered").length;
    const pending = batches - answered - outcomes.filter((o) => o?.kind === "failed").length;
    const firstError = run.errors[0];
    const busy = routerWasBusy(lateMs, deadlineMs);
    // Nothing answered and something already failed: the store is failing, not just slow.
    if (answered === 0 && firstError !== undefined) {
      this.#health.recordFailure(now, firstError, probe);
    } else if (busy) this.#health.recordAbandoned(now, probe);
    else this.#health.recordDeadline(now, probe);
    return {
      outcome: "deadline",
      locations: run.locations,
      batches,
      attempts: run.attempts,
      error: `deadline of ${deadlineMs} ms passed with ${pending} of ${batches} ` +
        `batches unanswered` + (firstError === undefined ? "" : `; first error: ${firstError}`) +
        (busy
          ? `; the router's event loop ran ${Math.round(lateMs)} ms late, so the ` +
            "store is not blamed"
          : ""),
    };
  }

  async #runBatch(
    batch: string[],
    signal: AbortSignal,
    deadlineAt: number,
    run: LookupRun,
  ): Promise<BatchOutcome> {
    const url = batchQueryUrl(this.#url, batch);
    let lastError = "no attempt made";
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      if (signal.aborted) return { kind: "aborted" };
      if (attempt > 1) {
        const left = deadlineAt - this.#now();
        if (left < this.#retryBackoffMs + MIN_ATTEMPT_MS) break;
        if (!await sleep(this.#retryBackoffMs, signal)) return { kind: "aborted" };
      }
      run.attempts++;
      const result = await this.#attempt(url, signal);
      if (result.kind === "aborted") return result;
      if (result.kind === "answered") {
        mergeAnswer(batch, result.locations, run.locations);
        return { kind: "answered" };
      }
      lastError = result.error;
      run.errors.push(result.error);
      if (!result.retryable) break;
    }
    return { kind: "failed", error: lastError };
  }

  async #attempt(
    url: string,
    signal: AbortSignal,
  ): Promise<
    | { kind: "answered"; locations: Map<string, KeyLocation> }
    | { kind: "failed"; error: string; retryable: boolean }
    | { kind: "aborted" }
  > {
    let status: number;
    let body: string;
    try {
      const response = await this.#fetch(url, {
        signal,
        headers: { accept: "application/json" },
      });
      status = response.status;
      body = await response.text();
    } catch (error) {
      if (signal.aborted) return { kind: "aborted" };
      return {
        kind: "failed",
        error: `cannot reach the Mooncake master at ${this.#url}: ${describe(error)}`,
        retryable: true,
      };
    }
    const parsed = parseBatchQueryKeysResponse(status, body);
    if (parsed.ok) return { kind: "answered", locations: parsed.locations };
    // A 400 is our request's fault: sending it again cannot help.
    return { kind: "failed", error: parsed.error, retryable: status !== 400 };
  }
}

/**
 * Answers are keyed as the master echoes them: decoded (v0.3.12+) or exactly as sent (older
 * masters take the value raw). Either way they are filed under the key we asked for.
 */
function mergeAnswer(
  batch: readonly string[],
  answer: ReadonlyMap<string, KeyLocation>,
  into: Map<string, KeyLocation>,
): void {
  for (const key of batch) {
    // A plain key is sent as is (mooncake_request.ts), so only the others can come back encoded.
    const location = answer.get(key) ??
      (isPlainStoreKey(key) ? undefined : answer.get(encodeURIComponent(key)));
    if (location !== undefined) into.set(key, location);
  }
}

function abortedPromise(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}

/** Resolves true after `ms`, or false as soon as the signal aborts (the timer is cleared). */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(!signal.aborted);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

function positiveInt(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback;
}
