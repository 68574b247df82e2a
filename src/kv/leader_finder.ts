import { masterRouteUrl } from "./mooncake_request.ts";
import { type MasterHealth, parseMasterHealth, servingMaster } from "./master_health.ts";

/**
 * Finds which configured Mooncake master serves by asking every one's `GET /health` at once
 * (docs/compat.md §4, "HA"). Lazy: a sweep runs only when asked (the client asks when the master
 * it follows stops serving, or while the store is marked down), never two at a time, at most one
 * per `timeoutMs`, and each is bounded by `timeoutMs`. Never throws.
 */
export interface LeaderFinderOptions {
  urls: readonly string[];
  fetch: typeof fetch;
  /** Milliseconds on a monotonic clock. */
  now: () => number;
  /** A sweep's bound, and the least time between two sweeps' starts. */
  timeoutMs: number;
}

export class LeaderFinder {
  readonly #options: LeaderFinderOptions;
  #running: Promise<string | undefined> | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;
  #sweeps = 0;

  constructor(options: LeaderFinderOptions) {
    this.#options = options;
  }

  /** Sweeps started so far. */
  get sweeps(): number {
    return this.#sweeps;
  }

  /**
   * The serving master (preferring `current`), or undefined when none says it serves. Undefined
   * at once, without a request, while a sweep runs or too soon after the last one started.
   */
  find(current: string): Promise<string | undefined> {
    const now = this.#options.now();
    if (this.#running !== undefined || now - this.#lastStart < this.#options.timeoutMs) {
      return Promise.resolve(undefined);
    }
    this.#lastStart = now;
    this.#sweeps++;
    const running = this.#sweep(current).finally(() => (this.#running = undefined));
    this.#running = running;
    return running;
  }

  async #sweep(current: string): Promise<string | undefined> {
    const { urls, timeoutMs } = this.#options;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const answers = await Promise.all(urls.map((url) => this.#health(url, controller.signal)));
      const reports = new Map<string, MasterHealth | undefined>();
      urls.forEach((url, i) => reports.set(url, answers[i]));
      return servingMaster(urls, reports, current);
    } finally {
      clearTimeout(timer);
    }
  }

  async #health(url: string, signal: AbortSignal): Promise<MasterHealth | undefined> {
    try {
      const response = await this.#options.fetch(masterRouteUrl(url, "/health"), {
        signal,
        headers: { accept: "application/json" },
      });
      return parseMasterHealth(response.status, await response.text());
    } catch {
      return undefined;
    }
  }
}
