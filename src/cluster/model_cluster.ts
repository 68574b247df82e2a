import type { HealthConfig, InstanceConfig } from "../config/schema.ts";
import type { Candidate } from "../scheduling/types.ts";
import { type BreakerState, CircuitBreaker } from "./circuit_breaker.ts";
import type { EngineLoadSource } from "./engine_load.ts";
import { decodeView } from "./decode_view.ts";
import { EngineLoadPoller, type InstanceLoadState } from "./engine_load_poller.ts";
import { HealthProber, type ProbeTarget } from "./health_prober.ts";
import { type InstanceLoad, LoadAccount } from "./load_account.ts";
import { RecentPrefillSizes } from "./recent_prefill_sizes.ts";
import { type ReconciledLoad, reconcileLoad } from "./reconcile.ts";
import type { Timers } from "./timers.ts";

export type InstanceOrigin = "config" | "discovery" | "admin";

export interface UpsertOptions {
  /**
   * Breaker state of a new instance (or one whose URL changed). "closed" (default) trusts it
   * until it fails, right for the instances a router boots with; "starting" sends it nothing
   * until a health probe passes (an engine added at runtime may still be loading its weights),
   * and probes it at once when background work runs.
   */
  initialState?: "closed" | "starting";
}

/** One backend as the dispatcher sees it: its config, breaker and what we know of its work. */
export interface InstanceEntry {
  config: InstanceConfig;
  breaker: CircuitBreaker;
  /** Takes no new requests; removed once its last request ends when `removeWhenIdle`. */
  draining: boolean;
  removeWhenIdle: boolean;
  /** Requests currently proxied to it (any phase). */
  active: number;
  /** Recent TTFTs (seconds), newest last, for the admin API and the dashboard. */
  recentTtftS: number[];
  /** Where the instance came from: the config file, DNS discovery, or the admin API. */
  origin: InstanceOrigin;
}

export interface InstanceStatus {
  id: string;
  url: string;
  kvHost?: string;
  role: string;
  engine: string;
  bootstrapPort?: number;
  origin: InstanceOrigin;
  healthy: boolean;
  breaker: BreakerState;
  draining: boolean;
  active: number;
  load: ReconciledLoad;
  engineReport?: InstanceLoadState;
  probeFailures: number;
  recentTtftS: { count: number; mean?: number; p50?: number; p90?: number };
}

export interface ModelClusterOptions {
  model: string;
  health: HealthConfig;
  fetch: typeof fetch;
  /** Monotonic milliseconds. */
  now: () => number;
  timers?: Timers;
  /** How often the engines' load pages are read (default 1000 ms) and when a report is stale. */
  loadPollIntervalMs?: number;
  loadStaleAfterMs?: number;
  /** Leases with no first token after this long are expired (default 10 s, as Llumnix). */
  leaseExpiryMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Called once an instance is gone for good, so per-instance state elsewhere can go too. */
  onRemoved?: (instanceId: string) => void;
  /**
   * Our decode leases on a decode instance whose request still prefills elsewhere
   * (DecodeOutlook.leasedJoiners), and whether the protocol sends their decode leg with the
   * prefill: where the engine's report counts them (decode_view.ts).
   */
  joiners?: { count: (instanceId: string) => number; sentAtOnce: boolean };
}

const TTFT_WINDOW = 256;

/** Our load when an engine reported, with our joiners there; the poller keeps it whole. */
type Snapshot = InstanceLoad & { joiners?: number };

const NOTHING_OURS: Snapshot = { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 };

/** vLLM and SGLang answer `/health` (503 while loading); any OpenAI server lists its models. */
const HEALTH_PATH: Record<InstanceConfig["engine"], string> = {
  vllm: "/health",
  sglang: "/health",
  openai: "/v1/models",
};

const LOAD_SOURCE: Record<InstanceConfig["engine"], EngineLoadSource | undefined> = {
  vllm: "vllm_metrics",
  sglang: "sglang_get_load",
  openai: undefined,
};

/**
 * The live set of instances serving one model: membership (config, discovery, admin), health
 * (one circuit breaker each, fed by probes and real traffic), and load (the dispatch-time account
 * reconciled with what the engines report).
 */
export class ModelCluster {
  readonly model: string;
  readonly account: LoadAccount;
  readonly recentPrefill = new RecentPrefillSizes();
  readonly #entries = new Map<string, InstanceEntry>();
  readonly #options: ModelClusterOptions;
  readonly #prober: HealthProber;
  readonly #poller: EngineLoadPoller;
  /** Probes of new instances sent outside the prober's rounds; stop() waits for them too. */
  readonly #newProbes = new Set<Promise<unknown>>();
  #running = false;

  constructor(options: ModelClusterOptions) {
    this.model = options.model;
    this.#options = options;
    this.account = new LoadAccount({ now: options.now, expireAfterMs: options.leaseExpiryMs });
    this.#prober = new HealthProber({
      targets: () => [...this.#entries.values()].map(probeTarget),
      fetch: options.fetch,
      now: options.now,
      timers: options.timers,
      intervalMs: options.health.intervalMs,
      timeoutMs: options.health.timeoutMs,
      onResult: (result) => this.#entries.get(result.instanceId)?.breaker.recordProbe(result),
    });
    this.#poller = new EngineLoadPoller({
      targets: () =>
        [...this.#entries.values()].flatMap((e) => {
          const source = LOAD_SOURCE[e.config.engine];
          return source ? [{ id: e.config.id, url: e.config.url, source }] : [];
        }),
      fetch: options.fetch,
      now: options.now,
      timers: options.timers,
      timeoutMs: Math.max(50, options.health.timeoutMs),
      intervalMs: options.loadPollIntervalMs ?? 1_000,
      staleAfterMs: options.loadStaleAfterMs ?? 5_000,
      localLoad: (id) => this.#onEngine(id),
    });
  }

  /** Our load on the instance, snapshotted with each report, and our joiners there then. */
  #onEngine(id: string): Snapshot {
    const snapshot: Snapshot = { ...this.account.load(id) };
    const joiners = this.#options.joiners?.count(id) ?? 0;
    if (joiners > 0) snapshot.joiners = joiners;
    return snapshot;
  }

  /** Starts health probes and load polling; the first round runs at once. */
  start(): void {
    this.#running = true;
    this.#prober.start();
    this.#poller.start();
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all([this.#prober.stop(), this.#poller.stop(), ...this.#newProbes]);
  }

  /** One probe and one load poll of every instance now (start-up and tests). */
  async refresh(): Promise<void> {
    await Promise.all([this.#prober.probeOnce(), this.#poller.pollOnce()]);
  }

  /** Probes one instance now and feeds its breaker (the admin API's add answers after it). */
  async probeInstance(id: string): Promise<void> {
    const entry = this.#entries.get(id);
    if (entry) await this.#prober.probe([probeTarget(entry)]);
  }

  get(id: string): InstanceEntry | undefined {
    return this.#entries.get(id);
  }

  entries(): InstanceEntry[] {
    return [...this.#entries.values()];
  }

  /** Adds an instance, or updates an existing one in place (a new URL gets a fresh breaker). */
  upsert(
    config: InstanceConfig,
    origin: InstanceOrigin,
    options: UpsertOptions = {},
  ): "added" | "updated" | "unchanged" {
    const initialState = options.initialState ?? "closed";
    const existing = this.#entries.get(config.id);
    if (existing) {
      const revived = existing.removeWhenIdle || existing.draining;
      existing.draining = false;
      existing.removeWhenIdle = false;
      existing.origin = origin;
      if (sameInstance(existing.config, config)) return revived ? "updated" : "unchanged";
      const moved = existing.config.url !== config.url;
      if (moved) existing.breaker = this.#newBreaker(config.id, initialState);
      existing.config = Object.freeze({ ...config });
      if (moved) this.#probeNew(existing);
      return "updated";
    }
    const entry: InstanceEntry = {
      config: Object.freeze({ ...config }),
      breaker: this.#newBreaker(config.id, initialState),
      draining: false,
      removeWhenIdle: false,
      active: 0,
      recentTtftS: [],
      origin,
    };
    this.#entries.set(config.id, entry);
    this.#probeNew(entry);
    return "added";
  }

  /** A starting instance is probed at once rather than at the next round (seconds away). */
  #probeNew(entry: InstanceEntry): void {
    if (!this.#running || entry.breaker.state !== "starting") return;
    const probe = this.#prober.probe([probeTarget(entry)]).catch(() => {});
    this.#newProbes.add(probe);
    probe.finally(() => this.#newProbes.delete(probe));
  }

  #newBreaker(id: string, initialState: "closed" | "starting"): CircuitBreaker {
    return new CircuitBreaker({
      now: this.#options.now,
      failureThreshold: this.#options.health.failuresToOpen,
      successThreshold: this.#options.health.successesToClose,
      coolDownMs: this.#options.health.openCooldownMs,
      initialState,
      // A boot instance is trusted, unless its very first answers say it is still loading.
      startingWhileUnproven: true,
      onStateChange: (change) =>
        this.#options.log?.("instance breaker changed", {
          model: this.model,
          instance: id,
          url: this.#entries.get(id)?.config.url,
          level: change.to === "open" ? "warn" : "info",
          ...change,
        }),
    });
  }

  /** Stops sending new requests; in-flight ones finish. */
  drain(id: string): boolean {
    const entry = this.#entries.get(id);
    if (!entry) return false;
    entry.draining = true;
    return true;
  }

  /** Drains the instance and forgets it once its last in-flight request has ended. */
  remove(id: string): boolean {
    const entry = this.#entries.get(id);
    if (!entry) return false;
    entry.draining = true;
    entry.removeWhenIdle = true;
    this.#collect(entry);
    return true;
  }

  /**
   * Makes membership of one origin equal `configs`: new ones are added, changed ones updated,
   * missing ones drained and removed when idle (a listed one being removed is taken back).
   * Instances of other origins are left alone; one drained by hand stays drained.
   */
  reconcileMembers(
    configs: readonly InstanceConfig[],
    origin: InstanceOrigin,
    options: UpsertOptions = {},
  ): {
    added: string[];
    updated: string[];
    removed: string[];
  } {
    const wanted = new Set(configs.map((c) => c.id));
    const result = { added: [] as string[], updated: [] as string[], removed: [] as string[] };
    for (const config of configs) {
      // A drain ordered through the admin API outlives reloads and discovery rounds.
      const existing = this.#entries.get(config.id);
      const drainedByAdmin = existing !== undefined && existing.draining &&
        !existing.removeWhenIdle;
      const change = this.upsert(config, origin, options);
      if (drainedByAdmin) existing.draining = true;
      if (change === "added") result.added.push(config.id);
      if (change === "updated") result.updated.push(config.id);
    }
    for (const entry of [...this.#entries.values()]) {
      if (entry.origin === origin && !wanted.has(entry.config.id) && !entry.removeWhenIdle) {
        this.remove(entry.config.id);
        result.removed.push(entry.config.id);
      }
    }
    return result;
  }

  /** The instance takes new traffic now. */
  isHealthy(entry: InstanceEntry): boolean {
    return !entry.draining && entry.breaker.available;
  }

  /** The fraction of its KV cache the engine last reported in use (a usable report only). */
  kvUsage(id: string): number | undefined {
    const state = this.#poller.state(id);
    return state.usable ? state.report?.kvUsage : undefined;
  }

  /**
   * The mean KV tokens of a request running on the engine, from its last usable report (the KV
   * in use over its running requests); undefined while it runs none or does not report its
   * cache's size.
   */
  kvTokensPerRequest(id: string): number | undefined {
    const state = this.#poller.state(id);
    const report = state.usable ? state.report : undefined;
    if (report?.kvUsedTokens === undefined || report.runningRequests <= 0) return undefined;
    return report.kvUsedTokens / report.runningRequests;
  }

  /** The reconciled load of one instance: our leases plus what the engine reports of others. */
  load(id: string): ReconciledLoad {
    return this.#reconciled(id, this.account.load(id), this.#meanUncachedTokens());
  }

  #reconciled(id: string, local: InstanceLoad, meanUncachedTokens: number): ReconciledLoad {
    const state = this.#poller.state(id);
    let engine = state.usable && state.report
      ? { report: state.report, localAtObservation: state.localAtObservation }
      : undefined;
    if (engine && this.#entries.get(id)?.config.role === "decode") {
      const at: Snapshot = engine.localAtObservation ?? NOTHING_OURS;
      const sentAtOnce = this.#options.joiners?.sentAtOnce ?? false;
      const view = decodeView(engine.report, at, at.joiners ?? 0, sentAtOnce);
      engine = { report: view.report, localAtObservation: view.ours };
    }
    return reconcileLoad({
      local,
      engine,
      meanUncachedTokens,
    });
  }

  /** The same for every instance at one moment: read once per candidates()/status() call. */
  #meanUncachedTokens(): number {
    return this.recentPrefill.mean(this.#options.now());
  }

  /**
   * Candidates for the policy: every non-removed instance (unhealthy ones marked so), carrying
   * its load and the prompt tokens it holds locally.
   */
  candidates(
    localPrefixTokens: (id: string) => number,
  ): { candidates: Candidate[]; entries: InstanceEntry[] } {
    const entries = [...this.#entries.values()].filter((e) => !e.removeWhenIdle);
    const meanUncachedTokens = this.#meanUncachedTokens();
    const candidates = entries.map((entry): Candidate => {
      const local = this.account.load(entry.config.id);
      const load = this.#reconciled(entry.config.id, local, meanUncachedTokens);
      return {
        id: entry.config.id,
        healthy: this.isHealthy(entry),
        localPrefixTokens: localPrefixTokens(entry.config.id),
        waitingPrefillTokens: load.waitingPrefillTokens,
        waitingPrefillRequests: local.prefillRequests,
        runningRequests: load.runningRequests,
      };
    });
    return { candidates, entries };
  }

  /** Marks a request started on an instance (for draining and the admin view). */
  begin(id: string): () => void {
    const entry = this.#entries.get(id);
    if (!entry) return () => {};
    entry.active++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      entry.active--;
      this.#collect(entry);
    };
  }

  recordTtft(id: string, seconds: number): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    entry.recentTtftS.push(seconds);
    if (entry.recentTtftS.length > TTFT_WINDOW) entry.recentTtftS.shift();
  }

  status(): InstanceStatus[] {
    const probes = this.#prober.stats.byInstance;
    const meanUncachedTokens = this.#meanUncachedTokens();
    return [...this.#entries.values()].map((entry) => {
      const sorted = [...entry.recentTtftS].sort((a, b) => a - b);
      const quantile = (q: number) =>
        sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
      const report = this.#poller.state(entry.config.id);
      return {
        id: entry.config.id,
        url: entry.config.url,
        kvHost: entry.config.kvHost,
        role: entry.config.role,
        engine: entry.config.engine,
        bootstrapPort: entry.config.bootstrapPort,
        origin: entry.origin,
        healthy: this.isHealthy(entry),
        breaker: entry.breaker.state,
        draining: entry.draining,
        active: entry.active,
        load: this.#reconciled(
          entry.config.id,
          this.account.load(entry.config.id),
          meanUncachedTokens,
        ),
        engineReport: report.report || report.lastError ? report : undefined,
        probeFailures: probes.get(entry.config.id)?.failures ?? 0,
        recentTtftS: sorted.length
          ? {
            count: sorted.length,
            mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
            p50: quantile(0.5),
            p90: quantile(0.9),
          }
          : { count: 0 },
      };
    });
  }

  #collect(entry: InstanceEntry): void {
    if (
      entry.removeWhenIdle && entry.active === 0 && this.#entries.get(entry.config.id) === entry
    ) {
      this.#entries.delete(entry.config.id);
      this.account.forget(entry.config.id);
      this.#options.onRemoved?.(entry.config.id);
      this.#options.log?.("instance removed", { model: this.model, instance: entry.config.id });
    }
  }
}

function probeTarget(entry: InstanceEntry): ProbeTarget {
  const { id, url, engine } = entry.config;
  return { id, url, path: HEALTH_PATH[engine] };
}

function sameInstance(a: InstanceConfig, b: InstanceConfig): boolean {
  return a.url === b.url && a.kvHost === b.kvHost && a.role === b.role &&
    a.engine === b.engine && a.bootstrapPort === b.bootstrapPort;
}
