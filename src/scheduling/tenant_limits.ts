import type { TenantBand } from "./priority_band.ts";
import { TokenBucket } from "./token_bucket.ts";

/** One tenant's rates; an absent rate is not limited. */
export interface TenantRates {
  requestsPerS?: number;
  promptTokensPerS?: number;
  /** Seconds of its rate a quiet tenant may spend at once. */
  burstS: number;
  /** Its share of the admission budget under SLO refusals (default 1). */
  weight?: number;
  /** Its requests' band in the flow-control queue when they ask none (src/scheduling/priority_band.ts). */
  priority?: number;
  /** The most urgent band its requests may ask for (default: `priority`). */
  minPriority?: number;
}

export interface TenantDefinition extends TenantRates {
  name: string;
  /** Client identities (API keys, `user` values or header values) that belong to it. */
  match: readonly string[];
}

/** Where a tenant stands for one kind of limit, for the `x-ratelimit-*` headers. */
export interface RateStanding {
  limit: number;
  remaining: number;
  resetS: number;
}

export type RateKind = "requests" | "prompt_tokens";

export type RateVerdict =
  | { admit: true; standing?: RateStanding }
  | { admit: false; kind: RateKind; standing: RateStanding };

/** The clients no tenant matches share this name (a bounded metric label). */
export const OTHER_TENANT = "other";

/**
 * Per-tenant token buckets for requests/s and prompt tokens/s. Identities map to configured
 * tenants; everyone else is `other`, limited only when `others` rates are given.
 */
export class TenantLimits {
  readonly #byIdentity = new Map<string, string>();
  readonly #weights = new Map<string, number>();
  readonly #bands = new Map<string, TenantBand>();
  readonly #buckets = new Map<string, Partial<Record<RateKind, TokenBucket>>>();

  constructor(
    tenants: readonly TenantDefinition[],
    others: TenantRates | undefined,
    nowMs: number,
  ) {
    for (const tenant of tenants) {
      for (const identity of tenant.match) this.#byIdentity.set(identity, tenant.name);
      this.#weights.set(tenant.name, tenant.weight ?? 1);
      this.#bands.set(tenant.name, tenant);
      this.#buckets.set(tenant.name, bucketsOf(tenant, nowMs));
    }
    this.#buckets.set(OTHER_TENANT, others ? bucketsOf(others, nowMs) : {});
    this.#weights.set(OTHER_TENANT, others?.weight ?? 1);
    this.#bands.set(OTHER_TENANT, others ?? {});
  }

  /** A tenant's priority bounds in the flow-control queue. */
  bandOf(tenant: string): TenantBand {
    return this.#bands.get(tenant) ?? {};
  }

  /** A tenant's weight for fair shares (1 unless configured). */
  weightOf(tenant: string): number {
    return this.#weights.get(tenant) ?? 1;
  }

  /** The tenant an identity belongs to (`other` for unknown or absent identities). */
  tenantOf(identity: string | undefined): string {
    return (identity !== undefined && this.#byIdentity.get(identity)) || OTHER_TENANT;
  }

  /** Charges `cost` of `kind` to `tenant`, or says how long until it could be afforded. */
  charge(tenant: string, kind: RateKind, cost: number, nowMs: number): RateVerdict {
    const bucket = this.#buckets.get(tenant)?.[kind];
    if (!bucket) return { admit: true };
    const admitted = bucket.take(cost, nowMs);
    const standing = {
      limit: bucket.capacity,
      remaining: Math.max(0, Math.floor(bucket.level(nowMs))),
      resetS: bucket.waitS(admitted ? bucket.capacity : cost, nowMs),
    };
    return admitted ? { admit: true, standing } : { admit: false, kind, standing };
  }
}

function bucketsOf(rates: TenantRates, nowMs: number): Partial<Record<RateKind, TokenBucket>> {
  const buckets: Partial<Record<RateKind, TokenBucket>> = {};
  if (rates.requestsPerS) {
    buckets.requests = new TokenBucket(rates.requestsPerS, burst(rates.requestsPerS, rates), nowMs);
  }
  if (rates.promptTokensPerS) {
    const capacity = burst(rates.promptTokensPerS, rates);
    buckets.prompt_tokens = new TokenBucket(rates.promptTokensPerS, capacity, nowMs);
  }
  return buckets;
}

/** At least one whole request or token fits, however small the burst. */
function burst(ratePerS: number, rates: TenantRates): number {
  return Math.max(1, ratePerS * rates.burstS);
}
