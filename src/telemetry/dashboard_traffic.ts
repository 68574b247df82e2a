/**
 * Per-instance traffic totals for the dashboard: requests, prompt tokens, predicted local hit
 * tokens and engine-reported cached tokens, counted from finished records exactly as
 * metrics_observer.ts counts `tidegate_requests_total`, `tidegate_prompt_tokens_total`,
 * `tidegate_predicted_hit_tokens_total{scope="local"}` and `tidegate_engine_cached_tokens_total`
 * (summed over arms), so the dashboard's hit ratios equal the ones computed from `/metrics`.
 * Pure.
 */
import type { RequestObserver, RequestRecord } from "../contracts.ts";
import { reportsReuse } from "../scheduling/predicted_reuse.ts";

export interface InstanceTrafficTotals {
  model: string;
  instance: string;
  requests: number;
  promptTokens: number;
  predictedLocalHitTokens: number;
  engineCachedTokens: number;
  /** Requests whose engine reported cached tokens (usage.prompt_tokens_details). */
  engineReports: number;
  /** Prompt tokens of those requests: the engine hit ratio's denominator. */
  engineReportedPromptTokens: number;
}

export class DashboardTraffic implements RequestObserver {
  /** `model\0instance` → totals. */
  readonly #totals = new Map<string, InstanceTrafficTotals>();
  readonly #maxInstances: number;

  /** Keeps at most `maxInstances` (model, instance) pairs (discovery churn cannot grow it forever). */
  constructor(maxInstances = 4096) {
    this.#maxInstances = Math.max(1, maxInstances);
  }

  onFinished(record: RequestRecord): void {
    if (!record.instanceId) return;
    const totals = this.#entry(record.model || "unknown", record.instanceId);
    if (!totals) return;
    totals.requests++;
    const plan = record.plan;
    if (!plan) return;
    totals.promptTokens += plan.promptTokens;
    totals.predictedLocalHitTokens +=
      plan.candidates.find((c) => c.id === record.instanceId)?.localPrefixTokens ?? 0;
    const cached = record.usage.cachedTokens;
    if (cached !== undefined && reportsReuse(plan, record)) {
      totals.engineCachedTokens += cached;
      totals.engineReports++;
      totals.engineReportedPromptTokens += plan.promptTokens;
    }
  }

  /** Totals of one instance (zeros when it has had no traffic). */
  get(model: string, instance: string): InstanceTrafficTotals {
    return { ...(this.#totals.get(`${model}\0${instance}`) ?? zero(model, instance)) };
  }

  all(): InstanceTrafficTotals[] {
    return [...this.#totals.values()].map((t) => ({ ...t }));
  }

  #entry(model: string, instance: string): InstanceTrafficTotals | undefined {
    const key = `${model}\0${instance}`;
    let totals = this.#totals.get(key);
    if (!totals && this.#totals.size < this.#maxInstances) {
      totals = zero(model, instance);
      this.#totals.set(key, totals);
    }
    return totals;
  }
}

function zero(model: string, instance: string): InstanceTrafficTotals {
  return {
    model,
    instance,
    requests: 0,
    promptTokens: 0,
    predictedLocalHitTokens: 0,
    engineCachedTokens: 0,
    engineReports: 0,
    engineReportedPromptTokens: 0,
  };
}
