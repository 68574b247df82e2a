import type { LoadLease } from "../cluster/load_account.ts";
import type { DispatchPlan } from "../contracts.ts";
import type { CandidateScore } from "../scheduling/types.ts";
import type { ModelRuntime } from "./model_runtime.ts";

/**
 * The load lease on the first choice, taken in the same synchronous step as the decision so
 * that concurrent requests see each other's work (else a burst all picks the same instance).
 * Whoever holds it either hands the lease to the attempt on that instance (`take`) or gives it
 * back with the predicted KV writes (`cancel`): exactly one of the two, once.
 */
export class Reservation {
  #lease?: LoadLease;
  readonly #forget: () => void;

  constructor(readonly instanceId: string, lease: LoadLease, forget: () => void) {
    this.#lease = lease;
    this.#forget = forget;
  }

  /** The lease, for the attempt on `instanceId`; undefined once taken or cancelled. */
  take(): LoadLease | undefined {
    const lease = this.#lease;
    this.#lease = undefined;
    return lease;
  }

  /** The instance will not compute this prompt: its load and predicted KV are given back. */
  cancel(): void {
    const lease = this.take();
    if (!lease) return;
    lease.release();
    this.#forget();
  }
}

/** Reserves the plan's first choice (see Reservation). */
export function reserveFirstChoice(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  at: number,
): Reservation | undefined {
  const first = plan.decision.ranking[0];
  if (!plan.admission.admit || first === undefined) return undefined;
  return new Reservation(
    first,
    reserve(runtime, plan, first, at),
    () => forgetPredictions(runtime, plan, first),
  );
}

/**
 * Leases the instance's share of the prompt and predicts its KV writes: both must be visible to
 * the very next decision, before any byte is sent.
 */
export function reserve(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  at: number,
): LoadLease {
  const uncached = uncachedTokens(plan, instanceId);
  runtime.cluster.recentPrefill.record(uncached, at);
  if (plan.keys.length > 0 && runtime.predicted) {
    runtime.predicted.record(plan.keys, {
      instanceId,
      kvHost: plan.entries.get(instanceId)?.config.kvHost,
    });
  }
  return runtime.cluster.account.lease(instanceId, uncached);
}

/** An instance that will not write this prompt's KV: followers must not be sent after it. */
export function forgetPredictions(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
): void {
  if (plan.keys.length > 0) runtime.predicted?.forget(plan.keys, instanceId);
}

/** Prompt tokens the chosen instance has to compute, given what the policy planned to reuse. */
export function uncachedTokens(plan: DispatchPlan, instanceId: string): number {
  const candidate = plan.candidates.find((c) => c.id === instanceId);
  const score = scoreOf(plan, instanceId);
  const reused = (candidate?.localPrefixTokens ?? 0) + (score?.transferTokens ?? 0);
  return Math.max(0, plan.promptTokens - reused);
}

export function scoreOf(plan: DispatchPlan, instanceId: string): CandidateScore | undefined {
  return plan.decision.scores.find((s) => s.id === instanceId);
}
