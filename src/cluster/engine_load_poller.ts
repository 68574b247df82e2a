/**
 * Polls every instance's own load page concurrently, each with a deadline, and keeps the latest
 * report per instance. A report older than `staleAfterMs` is kept for display but flagged
 * unusable, so reconciliation falls back to the router's own account (reconcile.ts).
 *
 * Edge: `fetch`, the clock and the timers are passed in.
 */
import {
  type EngineLoadReport,
  type EngineLoadSource,
  readSglangLoad,
  readSglangMetrics,
  readVllmMetrics,
} from "./engine_load.ts";
import { FetchTimeoutError, fetchWithTimeout } from "./fetch_timeout.ts";
import type { InstanceLoad } from "./load_account.ts";
import { PeriodicTask } from "./periodic_task.ts";
import { systemTimers, type Timers } from "./timers.ts";

export interface LoadPollTarget {
  id: string;
  /** The engine's root URL, e.g. `http://10.0.0.5:8000` (no `/v1`). */
  url: string;
  source: EngineLoadSource;
  /** Filters Prometheus series by `model_name` (the engine's served model name). */
  modelName?: string;
}

export interface EngineLoadPollerOptions {
  /** The instances to poll, asked each round (instances come and go). */
  targets: () => readonly LoadPollTarget[];
  fetch: typeof fetch;
  /** Milliseconds, the same clock as the LoadAccount's. */
  now: () => number;
  /** Deadline for one poll, body included. */
  timeoutMs: number;
  /** A report older than this is unusable. */
  staleAfterMs: number;
  /** Period of `start()`'s loop (default 1000 ms). */
  intervalMs?: number;
  timers?: Timers;
  /**
   * Our own account of an instance, snapshotted when its poll starts: reconciliation subtracts
   * what we had in flight then from what the engine reports (reconcile.ts).
   */
  localLoad?: (instanceId: string) => InstanceLoad;
}

export interface InstanceLoadState {
  instanceId: string;
  /** The latest report read, possibly stale. */
  report?: EngineLoadReport;
  /** Our account when `report` was observed. */
  localAtObservation?: InstanceLoad;
  /** A report exists and is no older than `staleAfterMs`. */
  usable: boolean;
  ageMs?: number;
  lastAttemptAtMs?: number;
  /** Why the last poll failed, if it did. */
  lastError?: string;
  consecutiveFailures: number;
}

export interface EngineLoadPollerStats {
  rounds: number;
  polls: number;
  failures: number;
  timeouts: number;
}

interface Entry {
  report?: EngineLoadReport;
  localAtObservation?: InstanceLoad;
  lastAttemptAtMs?: number;
  lastError?: string;
  consecutiveFailures: number;
}

const PATHS: Record<EngineLoadSource, string> = {
  vllm_metrics: "/metrics",
  sglang_get_load: "/get_load",
  sglang_metrics: "/metrics",
};

export class EngineLoadPoller {
  readonly #options: EngineLoadPollerOptions;
  readonly #timers: Timers;
  readonly #entries = new Map<string, Entry>();
  readonly #task: PeriodicTask;
  readonly stats: EngineLoadPollerStats = { rounds: 0, polls: 0, failures: 0, timeouts: 0 };

  constructor(options: EngineLoadPollerOptions) {
    if (!(options.timeoutMs > 0)) throw new Error("EngineLoadPoller: timeoutMs must be > 0");
    if (!(options.staleAfterMs > 0)) throw new Error("EngineLoadPoller: staleAfterMs must be > 0");
    this.#options = options;
    this.#timers = options.timers ?? systemTimers();
    this.#task = new PeriodicTask(
      () => this.pollOnce(),
      options.intervalMs ?? 1000,
      this.#timers,
      options.now,
    );
  }

  /** Polls every target once, concurrently; resolves when all have answered or timed out. */
  async pollOnce(): Promise<void> {
    const targets = this.#options.targets();
    const ids = new Set(targets.map((t) => t.id));
    for (const id of this.#entries.keys()) if (!ids.has(id)) this.#entries.delete(id);
    this.stats.rounds++;
    await Promise.all(targets.map((target) => this.#poll(target)));
  }

  /** The latest state of one instance, staleness judged now. */
  state(instanceId: string): InstanceLoadState {
    const entry = this.#entries.get(instanceId) ?? { consecutiveFailures: 0 };
    const state: InstanceLoadState = {
      instanceId,
      usable: false,
      consecutiveFailures: entry.consecutiveFailures,
    };
    if (entry.lastAttemptAtMs !== undefined) state.lastAttemptAtMs = entry.lastAttemptAtMs;
    if (entry.lastError !== undefined) state.lastError = entry.lastError;
    if (entry.report) {
      state.report = entry.report;
      if (entry.localAtObservation) state.localAtObservation = entry.localAtObservation;
      state.ageMs = this.#options.now() - entry.report.observedAtMs;
      state.usable = state.ageMs <= this.#options.staleAfterMs;
    }
    return state;
  }

  /** States of every instance polled so far. */
  states(): InstanceLoadState[] {
    return [...this.#entries.keys()].map((id) => this.state(id));
  }

  start(): void {
    this.#task.start();
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  async #poll(target: LoadPollTarget): Promise<void> {
    let entry = this.#entries.get(target.id);
    if (!entry) {
      entry = { consecutiveFailures: 0 };
      this.#entries.set(target.id, entry);
    }
    const observedAtMs = this.#options.now();
    const local = this.#options.localLoad?.(target.id);
    entry.lastAttemptAtMs = observedAtMs;
    this.stats.polls++;
    const url = target.url.replace(/\/+$/, "") + PATHS[target.source];
    try {
      const report = await fetchWithTimeout(
        url,
        { fetch: this.#options.fetch, timers: this.#timers, timeoutMs: this.#options.timeoutMs },
        async (response) => {
          if (!response.ok) {
            await response.body?.cancel();
            throw new Error(`HTTP ${response.status} from ${url}`);
          }
          const options = { observedAtMs, modelName: target.modelName };
          if (target.source === "sglang_get_load") {
            return readSglangLoad(await response.json(), options);
          }
          const text = await response.text();
          return target.source === "vllm_metrics"
            ? readVllmMetrics(text, options)
            : readSglangMetrics(text, options);
        },
      );
      // A slow answer must not overwrite a newer one.
      if (!entry.report || entry.report.observedAtMs <= observedAtMs) {
        entry.report = report;
        if (local) entry.localAtObservation = { ...local };
        else delete entry.localAtObservation;
      }
      entry.consecutiveFailures = 0;
      delete entry.lastError;
    } catch (error) {
      this.stats.failures++;
      if (error instanceof FetchTimeoutError) this.stats.timeouts++;
      entry.consecutiveFailures++;
      entry.lastError = error instanceof Error ? error.message : String(error);
    }
  }
}
