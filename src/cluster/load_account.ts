/**
 * The router's own account of work it sent to each instance (docs/compat.md §5): prefill tokens not
 * yet computed (added at dispatch, removed at the first token) and requests decoding. Every
 * request holds a lease that is released exactly once, however the request ends.
 */
export interface LoadLease {
  readonly instanceId: string;
  readonly prefillTokens: number;
  /** Sequences it decodes once past its prefill (a batch's prompts × `n`; at least 1). */
  readonly sequences: number;
  /** The first token arrived: the prefill part is done, the request now decodes. Idempotent. */
  firstToken(): void;
  /** The request ended (done, error, abort). Idempotent; later calls do nothing. */
  release(): void;
  readonly released: boolean;
}

export interface InstanceLoad {
  /** Uncomputed prefill tokens of requests we dispatched that have not seen a first token. */
  prefillTokens: number;
  /** Requests we dispatched that have not seen a first token. */
  prefillRequests: number;
  /** Sequences past their first token and not yet ended (a request asking `n` counts n). */
  decodeRequests: number;
}

export interface LoadAccountOptions {
  /** Prefill entries older than this that never saw a first token are dropped (default 10 s). */
  expireAfterMs?: number;
  /** Monotonic milliseconds. */
  now: () => number;
}

interface Entry {
  instanceId: string;
  prefillTokens: number;
  sequences: number;
  startedAt: number;
  phase: "prefill" | "decode" | "done";
}

/** Told of every lease the account hands out and of its changes (shared state, tests). */
export interface LeaseListener {
  leased(lease: LoadLease): void;
  firstToken(lease: LoadLease): void;
  released(lease: LoadLease): void;
}

export class LoadAccount {
  readonly #expireAfterMs: number;
  readonly #now: () => number;
  readonly #prefill = new Set<Entry>();
  readonly #totals = new Map<string, InstanceLoad>();
  #expired = 0;
  /** Forgotten while leases were out: dropped at their last release. */
  readonly #forgotten = new Set<string>();
  readonly #listeners = new Set<LeaseListener>();

  constructor(options: LoadAccountOptions) {
    this.#expireAfterMs = options.expireAfterMs ?? 10_000;
    this.#now = options.now;
  }

  /** Prefill entries dropped so far because they never saw a first token in time. */
  get expiredTotal(): number {
    return this.#expired;
  }

  /** Listens to leases taken from now on; `silent` ones (another replica's) are not told. */
  observe(listener: LeaseListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  lease(
    instanceId: string,
    prefillTokens: number,
    options: { silent?: boolean; sequences?: number } = {},
  ): LoadLease {
    const lease = this.#take(
      instanceId,
      prefillTokens,
      Math.max(1, Math.round(options.sequences ?? 1)),
      options.silent ? undefined : this.#listeners,
    );
    for (const listener of options.silent ? [] : this.#listeners) listener.leased(lease);
    return lease;
  }

  #take(
    instanceId: string,
    prefillTokens: number,
    sequences: number,
    listeners: ReadonlySet<LeaseListener> | undefined,
  ): LoadLease {
    const entry: Entry = {
      instanceId,
      prefillTokens: Math.max(0, Math.round(prefillTokens)),
      sequences,
      startedAt: this.#now(),
      phase: "prefill",
    };
    this.#prefill.add(entry);
    this.#forgotten.delete(instanceId); // it serves again
    const total = this.#total(instanceId);
    total.prefillTokens += entry.prefillTokens;
    total.prefillRequests++;
    const firstToken = () => {
      if (entry.phase !== "prefill") return;
      this.#leavePrefill(entry);
      entry.phase = "decode";
      this.#total(instanceId).decodeRequests += entry.sequences;
      for (const listener of listeners ?? []) listener.firstToken(lease);
    };
    const release = () => {
      if (entry.phase === "done") return;
      if (entry.phase === "prefill") this.#leavePrefill(entry);
      else this.#total(instanceId).decodeRequests -= entry.sequences;
      entry.phase = "done";
      if (this.#forgotten.has(instanceId)) this.forget(instanceId);
      for (const listener of listeners ?? []) listener.released(lease);
    };
    const lease: LoadLease = {
      instanceId,
      prefillTokens: entry.prefillTokens,
      sequences,
      firstToken,
      release,
      get released() {
        return entry.phase === "done";
      },
    };
    return lease;
  }

  /** Current load of one instance, after dropping expired prefill entries. */
  load(instanceId: string): InstanceLoad {
    this.expire();
    const total = this.#totals.get(instanceId);
    return total ? { ...total } : { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 };
  }

  /**
   * Drops prefill entries past the bound; returns how many were dropped now. Entries are added in
   * time order (the clock is monotonic), so the sweep ends at the first young one: it runs on every
   * `load()`, i.e. per candidate per request, and costs O(expired + 1), not O(in flight).
   */
  expire(): number {
    const cutoff = this.#now() - this.#expireAfterMs;
    let dropped = 0;
    for (const entry of this.#prefill) {
      if (entry.startedAt > cutoff) break;
      this.#leavePrefill(entry);
      // It still holds a decode slot if the engine is slow: count it as decoding until release.
      entry.phase = "decode";
      this.#total(entry.instanceId).decodeRequests += entry.sequences;
      dropped++;
    }
    this.#expired += dropped;
    return dropped;
  }

  /**
   * Drops an instance's totals (it left the cluster). With leases still out they go when the
   * last one is released, so ids that come and go (DNS discovery) leave nothing behind.
   */
  forget(instanceId: string): void {
    const total = this.#totals.get(instanceId);
    if (total && (total.prefillRequests > 0 || total.decodeRequests > 0)) {
      this.#forgotten.add(instanceId);
      return;
    }
    this.#totals.delete(instanceId);
    this.#forgotten.delete(instanceId);
  }

  /** How many instances the account holds totals for (bounded by the live members). */
  get trackedInstances(): number {
    return this.#totals.size;
  }

  #leavePrefill(entry: Entry): void {
    if (!this.#prefill.delete(entry)) return;
    const total = this.#total(entry.instanceId);
    total.prefillTokens -= entry.prefillTokens;
    total.prefillRequests--;
  }

  #total(instanceId: string): InstanceLoad {
    let total = this.#totals.get(instanceId);
    if (!total) {
      total = { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 };
      this.#totals.set(instanceId, total);
    }
    return total;
  }
}
