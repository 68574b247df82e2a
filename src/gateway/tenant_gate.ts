import type { Config } from "../config/schema.ts";
import { HttpError } from "../openai/errors.ts";
import type { ParsedRequest } from "../openai/request.ts";
import {
  type ExperimentKey,
  experimentKeyValue,
  parseExperimentKey,
} from "../experiment/experiment_key.ts";
import {
  type RateKind,
  type RateStanding,
  type RateVerdict,
  TenantLimits,
} from "../scheduling/tenant_limits.ts";
import { FairShare } from "../scheduling/fair_share.ts";
import { priorityBand } from "../scheduling/priority_band.ts";

type TenantsConfig = NonNullable<Config["tenants"]>;

/** A request refused by its tenant's rate limit (OpenAI's 429, with `Retry-After`). */
export class RateLimitedError extends HttpError {
  constructor(readonly kind: RateKind, tenant: string, standing: RateStanding) {
    const what = kind === "requests" ? "requests per second" : "prompt tokens per second";
    super(
      429,
      `Rate limit reached for tenant ${tenant} on ${what}: limit ${standing.limit}, retry in ` +
        `${standing.resetS.toFixed(2)} s.`,
      { type: "rate_limit_error", code: "rate_limit_exceeded" },
    );
    this.name = "RateLimitedError";
  }
}

/** A tenant over its weighted share while SLO admission is refusing (429, `Retry-After`). */
export class FairShareError extends HttpError {
  constructor(tenant: string) {
    super(
      429,
      `Tenant ${tenant} holds more than its weighted share of this model's admitted work while ` +
        "the model is refusing requests for its SLO; retry shortly.",
      { type: "rate_limit_error", code: "fair_share_exceeded", headers: { "retry-after": "1" } },
    );
    this.name = "FairShareError";
  }
}

/** How long after an SLO refusal fair shares are enforced. */
const FAIR_SHARE_WINDOW_MS = 5_000;

/**
 * The `tenants` section at the gateway: who a request's client is, and whether its tenant's
 * buckets admit it (requests at arrival, prompt tokens once counted). Rebuilt on reload only
 * when the section changed, so a reload does not refill every bucket.
 */
export class TenantGate {
  #section?: string;
  /** What names a client (`tenants.by`), read as experiment keys are. */
  #by?: ExperimentKey;
  #limits: TenantLimits | undefined;
  #fair: FairShare | undefined;

  constructor(config: TenantsConfig | undefined, readonly now: () => number) {
    this.sync(config);
  }

  sync(config: TenantsConfig | undefined): void {
    const section = JSON.stringify(config ?? null);
    if (section === this.#section) return;
    this.#section = section;
    this.#by = config && parseExperimentKey(config.by);
    this.#limits = config ? new TenantLimits(config.list, config.others, this.now()) : undefined;
    this.#fair = this.#fairShareOf(this.#limits);
  }

  #fairShareOf(limits: TenantLimits | undefined): FairShare | undefined {
    return limits && new FairShare((tenant) => limits.weightOf(tenant), FAIR_SHARE_WINDOW_MS);
  }

  /** The model's SLO admission refused a request: fair shares apply for a while. */
  noteRefusal(model: string): void {
    this.#fair?.noteRefusal(model, this.now());
  }

  /** Throws FairShareError when the model is refusing for its SLO and the tenant is over its share. */
  checkShare(model: string, tenant: string, tokens: number): void {
    if (this.#fair && !this.#fair.allows(model, tenant, tokens, this.now())) {
      throw new FairShareError(tenant);
    }
  }

  /** Holds `tokens` of `tenant`'s admitted work on `model` until the returned call. */
  holdShare(model: string, tenant: string, tokens: number): () => void {
    return this.#fair ? this.#fair.hold(model, tenant, tokens) : () => {};
  }

  /** The client's tenant; undefined when no `tenants` section is configured. */
  tenantOf(request: Request, parsed: ParsedRequest): string | undefined {
    if (!this.#limits || !this.#by) return undefined;
    const identity = experimentKeyValue(
      this.#by,
      { headers: request.headers, body: parsed.body },
      0,
    );
    return this.#limits.tenantOf(identity ?? undefined);
  }

  /**
   * The request's band in the flow-control queue: `x-tidegate-priority`, else the body's integer
   * `priority` (forwarded as it is), bounded by its tenant's config.
   */
  priorityOf(request: Request, parsed: ParsedRequest, tenant: string | undefined): number {
    const header = request.headers.get("x-tidegate-priority")?.trim();
    if (header !== undefined && !/^[+-]?\d{1,6}$/.test(header)) {
      throw new HttpError(
        400,
        `x-tidegate-priority must be an integer, got "${header.slice(0, 40)}"`,
        {
          code: "invalid_priority",
        },
      );
    }
    const body = parsed.body.priority;
    const asked = header !== undefined
      ? Number(header)
      : Number.isInteger(body)
      ? body as number
      : undefined;
    return priorityBand(asked, tenant && this.#limits ? this.#limits.bandOf(tenant) : undefined);
  }

  /** A tenant's weight inside its band (1 without tenants). */
  weightOf(tenant: string | undefined): number {
    return tenant && this.#limits ? this.#limits.weightOf(tenant) : 1;
  }

  /** Charges `cost` (1 request, or the prompt's tokens); throws RateLimitedError when refused. */
  charge(tenant: string, kind: RateKind, cost: number, headers: Headers): void {
    const verdict: RateVerdict = this.#limits?.charge(tenant, kind, cost, this.now()) ??
      { admit: true };
    if (verdict.admit && !verdict.standing) return;
    const standing = verdict.standing!;
    setRateHeaders(headers, kind, standing);
    if (verdict.admit) return;
    headers.set("retry-after", String(Math.max(1, Math.ceil(standing.resetS))));
    throw new RateLimitedError(kind, tenant, standing);
  }
}

/** OpenAI's `x-ratelimit-*` headers (`requests` or `tokens`). */
function setRateHeaders(headers: Headers, kind: RateKind, standing: RateStanding): void {
  const suffix = kind === "requests" ? "requests" : "tokens";
  headers.set(`x-ratelimit-limit-${suffix}`, String(Math.floor(standing.limit)));
  headers.set(`x-ratelimit-remaining-${suffix}`, String(standing.remaining));
  headers.set(`x-ratelimit-reset-${suffix}`, duration(standing.resetS));
}

/** `250ms`, `1.5s`: the duration format of OpenAI's reset headers. */
function duration(seconds: number): string {
  return seconds < 1 ? `${Math.ceil(seconds * 1000)}ms` : `${Number(seconds.toFixed(1))}s`;
}
