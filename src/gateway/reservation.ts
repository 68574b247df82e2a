import type { LoadLease } from "../cluster/load_account.ts";
import type { DispatchPlan } from "../contracts.ts";
import type { CandidateScore } from "../scheduling/types.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";

/**
 * The load lease on the first choice, taken in the same synchronous step as the decision so
 * that concurrent requests see each other's work (else a burst all picks the same instance).
 * Whoever holds it either hands the lease to the attempt on that instance (`take`) or gives it
 * back with the predicted KV writes (`cancel`): exactly one of the two, once.
 */
export class Reservation {
  #lease?: LoadLease;
  readonly #forget: () => void;
  /** A decode slot's request has reached the decode instance (its prefill ended). Idempotent. */
  arrived: () => void = () => {};

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
 * A local prefill (conditional disaggregation): the decode instance computes the part of the
 * prompt it lacks and then decodes, as a whole request.
 */
export function reserveLocalPrefill(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  at: number,
): Reservation | undefined {
  const id = plan.decode?.decision.ranking[0];
  const verdict = plan.decode?.localPrefill;
  if (!plan.admission.admit || id === undefined || !verdict?.local) return undefined;
  runtime.cluster.recentPrefill.record(verdict.uncachedTokens, at);
  if (plan.keys.length > 0 && runtime.predicted) {
    runtime.predicted.record(plan.keys, {
      instanceId: id,
      kvHost: plan.entries.get(id)?.config.kvHost,
    });
  }
  const lease = runtime.cluster.account.lease(id, verdict.uncachedTokens, {
    sequences: plan.sequences,
  });
  return new Reservation(id, lease, () => forgetPredictions(runtime, plan, id));
}

/**
 * A disaggregated plan's decode slot: a decode lease on the chosen decode instance (a request
 * decoding there from now on, as the next decision must see) and its expected arrival there when
 * the prefill ends (prediction-based early rejection). Cancelling gives both back.
 */
export function reserveDecode(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  at: number,
): Reservation | undefined {
  const id = plan.decode?.decision.ranking[0];
  if (!plan.admission.admit || id === undefined) return undefined;
  const lease = decodeLease(runtime, id, plan.sequences);
  const arrives = runtime.decodeOutlook?.expect(id, at + (plan.predictedTtftS ?? 0) * 1000);
  const reservation = new Reservation(id, lease, () => arrives?.());
  if (arrives) reservation.arrived = arrives;
  return reservation;
}

/** A lease that counts a request's sequences decoding on the instance (no prefill tokens). */
export function decodeLease(runtime: ModelRuntime, instanceId: string, sequences = 1): LoadLease {
  const lease = runtime.cluster.account.lease(instanceId, 0, { sequences });
  lease.firstToken();
  return lease;
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
  return runtime.cluster.account.lease(instanceId, uncached, { sequences: plan.sequences });
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
