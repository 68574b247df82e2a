/**
 * Which instance stored which Responses API response: vLLM keeps stored responses in the memory
 * of the server that made them, so a request continuing one (`previous_response_id`) and a GET or
 * cancel of one must go there. Bounded (the oldest forgotten first) and expiring; pure.
 */
export interface ResponseHome {
  model: string;
  instanceId: string;
}

export class ResponseHomes {
  readonly #homes = new Map<string, ResponseHome & { until: number }>();

  constructor(readonly ttlMs = 3_600_000, readonly maxEntries = 100_000) {}

  remember(responseId: string, home: ResponseHome, now: number): void {
    this.#homes.delete(responseId); // re-inserted last: the map's order is the expiry order
    this.#homes.set(responseId, { ...home, until: now + this.ttlMs });
    if (this.#homes.size > this.maxEntries) {
      this.#homes.delete(this.#homes.keys().next().value!);
    }
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
