/**
 * Which instances answered 404 for which load-routed path (a pooling route on a generative model,
 * a route an older engine lacks), remembered for `ttlMs` so that the next requests skip them; an
 * engine restarted with another model is tried again after that. Bounded: past `maxEntries` the
 * oldest memory goes first.
 */
export class RouteSupport {
  readonly #notServedUntil = new Map<string, number>();

  constructor(
    readonly ttlMs = 5 * 60_000,
    readonly maxEntries = 10_000,
  ) {}

  markNotServed(model: string, instanceId: string, path: string, now: number): void {
    const key = keyOf(model, instanceId, path);
    this.#notServedUntil.delete(key); // re-inserted last: the map's order is the expiry order
    this.#notServedUntil.set(key, now + this.ttlMs);
    if (this.#notServedUntil.size > this.maxEntries) {
      this.#notServedUntil.delete(this.#notServedUntil.keys().next().value!);
    }
  }

  serves(model: string, instanceId: string, path: string, now: number): boolean {
    const key = keyOf(model, instanceId, path);
    const until = this.#notServedUntil.get(key);
    if (until === undefined) return true;
    if (now < until) return false;
    this.#notServedUntil.delete(key);
    return true;
  }
}

function keyOf(model: string, instanceId: string, path: string): string {
  return `${model}\n${instanceId}\n${path}`;
}
