/**
 * Probes `GET /health` of every instance each interval, concurrently, with a deadline, and hands
 * each result to `onResult` (typically `breaker.recordProbe(result)`).
 *
 *   2xx → healthy · 503 → starting (vLLM/SGLang while loading) · other status → failed (http_5xx
 *   or other) · no connection → failed (connect) · no answer in time → failed (timeout)
 *
 * Edge: `fetch`, the clock and the timers are passed in.
 */
import type { FailureKind, ProbeOutcome } from "./circuit_breaker.ts";
import { FetchTimeoutError, fetchWithTimeout } from "./fetch_timeout.ts";
import { PeriodicTask } from "./periodic_task.ts";
import { systemTimers, type Timers } from "./timers.ts";

export interface ProbeTarget {
  id: string;
  /** The engine's root URL (no `/v1`). */
  url: string;
  /** Overrides the prober's path for this target (e.g. `/v1/models` for a plain OpenAI server). */
  path?: string;
}

export interface ProbeResult {
  instanceId: string;
  outcome: ProbeOutcome;
  /** Set when outcome is "failed". */
  failure?: FailureKind;
  status?: number;
  error?: string;
  latencyMs: number;
  atMs: number;
}

export interface HealthProberOptions {
  targets: () => readonly ProbeTarget[];
  fetch: typeof fetch;
  now: () => number;
  onResult: (result: ProbeResult) => void;
  /** Period of `start()`'s loop (default 2000 ms). */
  intervalMs?: number;
  /** Deadline of one probe (default 1000 ms). */
  timeoutMs?: number;
  /** Default "/health". */
  path?: string;
  timers?: Timers;
}

export interface InstanceProbeStats {
  probes: number;
  failures: number;
  consecutiveFailures: number;
  last?: ProbeResult;
}

export interface HealthProberStats {
  rounds: number;
  probes: number;
  failures: number;
  byInstance: Map<string, InstanceProbeStats>;
}

export class HealthProber {
  readonly #options: HealthProberOptions;
  readonly #timers: Timers;
  readonly #task: PeriodicTask;
  readonly stats: HealthProberStats = { rounds: 0, probes: 0, failures: 0, byInstance: new Map() };

  constructor(options: HealthProberOptions) {
    this.#options = options;
    this.#timers = options.timers ?? systemTimers();
    this.#task = new PeriodicTask(
      async () => {
        await this.probeOnce();
      },
      options.intervalMs ?? 2000,
      this.#timers,
      options.now,
    );
  }

  /** Probes every target once, concurrently; each result also goes to `onResult`. */
  async probeOnce(): Promise<ProbeResult[]> {
    const targets = this.#options.targets();
    const ids = new Set(targets.map((t) => t.id));
    for (const id of this.stats.byInstance.keys()) {
      if (!ids.has(id)) this.stats.byInstance.delete(id);
    }
    this.stats.rounds++;
    return await Promise.all(targets.map((target) => this.#probe(target)));
  }

  /** Probes some targets now, outside the loop (a new instance need not wait for a round). */
  async probe(targets: readonly ProbeTarget[]): Promise<ProbeResult[]> {
    return await Promise.all(targets.map((target) => this.#probe(target)));
  }

  start(): void {
    this.#task.start();
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  async #probe(target: ProbeTarget): Promise<ProbeResult> {
    const atMs = this.#options.now();
    const url = target.url.replace(/\/+$/, "") + (target.path ?? this.#options.path ?? "/health");
    let result: ProbeResult;
    try {
      const status = await fetchWithTimeout(
        url,
        {
          fetch: this.#options.fetch,
          timers: this.#timers,
          timeoutMs: this.#options.timeoutMs ?? 1000,
        },
        async (response) => {
          await response.body?.cancel();
          return response.status;
        },
      );
      const base = { instanceId: target.id, status, atMs, latencyMs: this.#options.now() - atMs };
      if (status >= 200 && status < 300) result = { ...base, outcome: "healthy" };
      else if (status === 503) result = { ...base, outcome: "starting" };
      else {
        result = {
          ...base,
          outcome: "failed",
          failure: status >= 500 ? "http_5xx" : "other",
          error: `HTTP ${status} from ${url}`,
        };
      }
    } catch (error) {
      result = {
        instanceId: target.id,
        outcome: "failed",
        failure: error instanceof FetchTimeoutError ? "timeout" : "connect",
        error: error instanceof Error ? error.message : String(error),
        atMs,
        latencyMs: this.#options.now() - atMs,
      };
    }
    this.#count(result);
    this.#options.onResult(result);
    return result;
  }

  #count(result: ProbeResult): void {
    let stats = this.stats.byInstance.get(result.instanceId);
    if (!stats) {
      stats = { probes: 0, failures: 0, consecutiveFailures: 0 };
      this.stats.byInstance.set(result.instanceId, stats);
    }
    this.stats.probes++;
    stats.probes++;
    stats.last = result;
    // "starting" (503) is an answer, not a probe failure: the breaker decides what it means.
    if (result.outcome === "failed") {
      this.stats.failures++;
      stats.failures++;
      stats.consecutiveFailures++;
    } else stats.consecutiveFailures = 0;
  }
}
