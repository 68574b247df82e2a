/**
 * Which instance stored which Responses API response: vLLM keeps stored responses in the memory
 * of the server that made them, so a request continuing one (`previous_response_id`) and a GET or
 * cancel of one must go there. Bounded (the oldest forgotten first) and expiring; pure. Homes
 * learnt here are told to listeners (the replicas' shared state, src/cluster/shared_state.ts).
 */
export interface ResponseHome {
  model: string;
  instanceId: string;
}

/** Told of each home this router learns itself (not of those other replicas tell it). */
export type HomeListener = (responseId: string, home: ResponseHome) => void;

export class ResponseHomes {
  readonly #homes = new Map<string, ResponseHome & { until: number }>();
  readonly #listeners = new Set<HomeListener>();

  constructor(readonly ttlMs = 3_600_000, readonly maxEntries = 100_000) {}

  /** `silent`: another replica's, not told to listeners (they would send it back). */
  remember(
    responseId: string,
    home: ResponseHome,
    now: number,
    options: { silent?: boolean } = {},
  ): void {
    this.#homes.delete(responseId); // re-inserted last: the map's order is the expiry order
    this.#homes.set(responseId, { ...home, until: now + this.ttlMs });
    if (this.#homes.size > this.maxEntries) {
      this.#homes.delete(this.#homes.keys().next().value!);
    }
    if (options.silent) return;
    for (const listener of this.#listeners) listener(responseId, home);
  }

  observe(listener: HomeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  find(responseId: string, now: number): ResponseHome | undefined {
    const home = this.#homes.get(responseId);
    if (!home) return undefined;
    if (now >= home.until) {
      this.#homes.delete(responseId);
      return undefined;
    }
    return { model: home.model, instanceId: home.instanceId };
  }

  get size(): number {
    return this.#homes.size;
  }
}
