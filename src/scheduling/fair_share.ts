/**
 * Weighted fair shares of a model's admitted prompt work between tenants, enforced only while the
 * model's SLO admission is refusing requests (a refusal within `windowMs`): then a tenant whose
 * in-flight prompt tokens would exceed its weight's share of everyone's yields first, so one
 * tenant's burst cannot take the whole admission budget. Pure: the caller passes the time.
 */
export class FairShare {
  readonly #inFlight = new Map<string, Map<string, number>>();
  readonly #lastRefusalMs = new Map<string, number>();

  constructor(
    readonly weightOf: (tenant: string) => number,
    readonly windowMs: number,
  ) {}

  /** The model's SLO admission refused a request at `nowMs`. */
  noteRefusal(model: string, nowMs: number): void {
    this.#lastRefusalMs.set(model, nowMs);
  }

  /** Whether `tenant` may add `tokens` of prompt work on `model` now. */
  allows(model: string, tenant: string, tokens: number, nowMs: number): boolean {
    const refused = this.#lastRefusalMs.get(model);
    if (refused === undefined || nowMs - refused > this.windowMs) return true;
    const loads = this.#inFlight.get(model);
    const own = this.weightOf(tenant);
    let weights = own;
    let total = tokens;
    for (const [other, load] of loads ?? []) {
      total += load;
      if (other !== tenant && load > 0) weights += this.weightOf(other);
    }
    if (weights === own) return true; // nobody else is waiting: nothing to share
    return (loads?.get(tenant) ?? 0) + tokens <= (own / weights) * total;
  }

  /** Counts `tokens` of `tenant`'s work on `model` until the returned call (once). */
  hold(model: string, tenant: string, tokens: number): () => void {
    let loads = this.#inFlight.get(model);
    if (!loads) this.#inFlight.set(model, loads = new Map());
    loads.set(tenant, (loads.get(tenant) ?? 0) + tokens);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = (loads.get(tenant) ?? 0) - tokens;
      if (left > 0) loads.set(tenant, left);
      else loads.delete(tenant);
    };
  }
}
