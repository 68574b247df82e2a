import type { KeyLocation, KvIndex, LookupResult } from "./types.ts";
import {
  batchQueryUrl,
  isPlainStoreKey,
  splitIntoBatches,
  storeKeyProblem,
} from "./mooncake_request.ts";
import { parseBatchQueryKeysResponse } from "./mooncake_response.ts";
import { StoreHealth } from "./store_health.ts";
import {
  attemptBudget,
  type MasterVerdict,
  newTrail,
  nextMaster,
  recordAttempt,
  verdictOf,
} from "./master_choice.ts";
import { LeaderFinder } from "./leader_finder.ts";

/**
 * Asks a Mooncake master where keys live (docs/compat.md §4-5): one logical
 * `GET /batch_query_keys?keys=...` cut into batches sent concurrently, retried inside one
 * per-lookup deadline, gated by `StoreHealth`. Fails open: it never throws, and whatever
 * answered before the deadline is returned.
 *
 * With several masters (an HA group) it follows the one that serves: a standby's 503 or a 404 is
 * never retried on the same master, the batch moves to the next one inside the same deadline,
 * and the master that answered is asked first from then on (`master_choice.ts`). When the
 * followed master stops serving, or while the store is marked down, a bounded `/health` sweep
 * (`leader_finder.ts`) looks for the one that does.
 */
export interface MooncakeClientOptions {
  /**
   * The master's admin base URL (its `--metrics_port`, default 9003), e.g. `http://10.0.0.2:9003`,
   * or every master of an HA group, tried in this order.
   */
  url: string | readonly string[];
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
  /** Pause between attempts of one batch on the same master (default 5 ms). */
  retryBackoffMs?: number;
  /** Bound of one `/health` sweep of the masters, and least time between two (default 1 000 ms). */
  leaderCheckTimeoutMs?: number;
  /** Told when the client starts following another master. */
  onMasterChange?: (change: { from: string; to: string }) => void;
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
  readonly #urls: readonly string[];
  #current: string;
  readonly #finder: LeaderFinder;
  readonly #onMasterChange: MooncakeClientOptions["onMasterChange"];
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #health: StoreHealth;
  readonly #batchSize: number;
  readonly #deadlineMs: number;
  readonly #maxAttempts: number;
  readonly #retryBackoffMs: number;

  constructor(options: MooncakeClientOptions) {
    this.#urls = typeof options.url === "string" ? [options.url] : [...new Set(options.url)];
    if (this.#urls.length === 0) throw new Error("MooncakeClient needs at least one master URL");
    this.#current = this.#urls[0];
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#now = options.now ?? (() => performance.now());
    this.#finder = new LeaderFinder({
      urls: this.#urls,
      fetch: this.#fetch,
      now: this.#now,
      timeoutMs: positive(options.leaderCheckTimeoutMs, 1_000),
    });
    this.#onMasterChange = options.onMasterChange;
    this.#health = options.health ?? new StoreHealth();
    this.#batchSize = positiveInt(options.batchSize, 128);
    this.#deadlineMs = positive(options.deadlineMs, 50);
    this.#maxAttempts = positiveInt(options.maxAttempts, 3);
    this.#retryBackoffMs = Math.max(0, options.retryBackoffMs ?? 5);
  }

  get health(): StoreHealth {
    return this.#health;
  }

  /** The master asked first: the one that served last. */
  get url(): string {
    return this.#current;
  }

  /** Every configured master, in configured order. */
  get urls(): readonly string[] {
    return this.#urls;
  }

  /** `/health` sweeps run so far to find the serving master. */
  get leaderChecks(): number {
    return this.#finder.sweeps;
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
      this.#lookForLeader();
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
    const trail = newTrail();
    const budget = attemptBudget(this.#maxAttempts, this.#urls.length);
    let url: string | undefined = this.#current;
    let lastError = "no attempt made";
    for (let attempt = 1; attempt <= budget && url !== undefined; attempt++) {
      if (signal.aborted) return { kind: "aborted" };
      if (attempt > 1) {
        // Another master is asked at once; the same one again only after the backoff.
        const pause = trail.asked.has(url) ? this.#retryBackoffMs : 0;
        if (deadlineAt - this.#now() < pause + MIN_ATTEMPT_MS) break;
        if (pause > 0 && !await sleep(pause, signal)) return { kind: "aborted" };
      }
      run.attempts++;
      const result = await this.#attempt(url, batch, signal);
      if (result.kind === "aborted") return result;
      recordAttempt(trail, url, result.verdict);
      if (result.kind === "answered") {
        this.#follow(url);
        mergeAnswer(batch, result.locations, run.locations);
        return { kind: "answered" };
      }
      lastError = result.error;
      run.errors.push(result.error);
      if (url === this.#current) this.#lookForLeader(result.verdict);
      url = nextMaster(this.#urls, url, result.verdict, trail);
    }
    return { kind: "failed", error: lastError };
  }

  async #attempt(
    base: string,
    batch: readonly string[],
    signal: AbortSignal,
  ): Promise<
    | { kind: "answered"; locations: Map<string, KeyLocation>; verdict: MasterVerdict }
    | { kind: "failed"; error: string; verdict: MasterVerdict }
    | { kind: "aborted" }
  > {
    let status: number;
    let body: string;
    try {
      const response = await this.#fetch(batchQueryUrl(base, batch), {
        signal,
        headers: { accept: "application/json" },
      });
      status = response.status;
      body = await response.text();
    } catch (error) {
      if (signal.aborted) return { kind: "aborted" };
      return {
        kind: "failed",
        error: `cannot reach the Mooncake master at ${base}: ${describe(error)}`,
        verdict: verdictOf(undefined, false),
      };
    }
    const parsed = parseBatchQueryKeysResponse(status, body);
    const verdict = verdictOf(status, parsed.ok);
    if (parsed.ok) return { kind: "answered", locations: parsed.locations, verdict };
    const error = this.#urls.length > 1 ? `${base}: ${parsed.error}` : parsed.error;
    return { kind: "failed", error, verdict };
  }

  /** Asks `url` first from now on. */
  #follow(url: string): void {
    if (url === this.#current) return;
    const from = this.#current;
    this.#current = url;
    this.#onMasterChange?.({ from, to: url });
  }

  /**
   * With several masters, after the followed one stopped serving (or while the store is down):
   * a `/health` sweep in the background. A different master that serves is followed, and a
   * down-window ends at once so the next lookup probes it.
   */
  #lookForLeader(verdict: MasterVerdict = "not_serving"): void {
    if (this.#urls.length < 2) return;
    if (verdict !== "not_serving" && verdict !== "unreachable") return;
    const followed = this.#current;
    void this.#finder.find(followed).then((leader) => {
      if (leader === undefined || leader === followed) return;
      this.#follow(leader);
      this.#health.endWindow(this.#now());
    });
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
