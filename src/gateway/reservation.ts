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

  /**
   * `predictedAt`: when the plan's keys were recorded as being written there (undefined: they were
   * not), for the attempt that takes the lease and may have to take them back.
   */
  constructor(
    readonly instanceId: string,
    lease: LoadLease,
    forget: () => void,
    readonly predictedAt?: number,
  ) {
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
  const { lease, predictedAt } = reserve(runtime, plan, first, at);
  const forget = () => forgetPredictions(runtime, plan, first, predictedAt);
  return new Reservation(first, lease, forget, predictedAt);
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
  const predictedAt = predictWrites(runtime, plan, id);
  const lease = runtime.cluster.account.lease(id, verdict.uncachedTokens, {
    sequences: plan.sequences,
  });
  const forget = () => forgetPredictions(runtime, plan, id, predictedAt);
  return new Reservation(id, lease, forget, predictedAt);
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

/** A lease on an instance, and when its KV writes were predicted (undefined: they were not). */
export interface Reserved {
  lease: LoadLease;
  predictedAt?: number;
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
): Reserved {
  const uncached = uncachedTokens(plan, instanceId);
  runtime.cluster.recentPrefill.record(uncached, at);
  const predictedAt = predictWrites(runtime, plan, instanceId);
  const lease = runtime.cluster.account.lease(instanceId, uncached, { sequences: plan.sequences });
  return { lease, predictedAt };
}

/** Records that the instance is writing the plan's keys; when, or undefined when nothing was. */
function predictWrites(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
): number | undefined {
  if (plan.keys.length === 0 || !runtime.predicted) return undefined;
  return runtime.predicted.record(plan.keys, {
    instanceId,
    kvHost: plan.entries.get(instanceId)?.config.kvHost,
  });
}

/**
 * An instance that will not write this prompt's KV: the prediction recorded at `predictedAt` is
 * taken back, so followers are not sent after it.
 */
export function forgetPredictions(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  predictedAt: number | undefined,
): void {
  if (predictedAt === undefined || plan.keys.length === 0) return;
  runtime.predicted?.forget(plan.keys, instanceId, predictedAt);
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
