import type { LoadLease } from "../cluster/load_account.ts";
import type { DispatchPlan } from "../contracts.ts";
import type { CandidateScore } from "../scheduling/types.ts";
import { predictedReuseTokens } from "../scheduling/predicted_reuse.ts";
import { localUncachedTokens } from "../scheduling/local_prefill.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import { poolLoadsOf } from "../config/pool_loads.ts";

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

  /** `forget` takes back what the reservation predicted (an attempt that fails calls it too). */
  constructor(readonly instanceId: string, lease: LoadLease, forget: () => void) {
    this.#lease = lease;
    this.#forget = forget;
  }

  /** The lease and its predictions' undo, for the attempt on `instanceId`; once. */
  take(): Reserved | undefined {
    const lease = this.#lease;
    this.#lease = undefined;
    return lease && { lease, forget: this.#forget };
  }

  /** The instance will not compute this prompt: its load and predicted KV are given back. */
  cancel(): void {
    const taken = this.take();
    if (!taken) return;
    taken.lease.release();
    taken.forget();
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
  const { lease, forget } = reserve(runtime, plan, first, at);
  return new Reservation(first, lease, forget);
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
  const { lease, forget } = localLease(runtime, plan, id, verdict.uncachedTokens, at);
  return new Reservation(id, lease, forget);
}

/**
 * A local prefill retried on another decode instance: leased and expected there as on the first
 * (`reserveLocalPrefill`), for the prompt that instance lacks (its own prefix, or the pool's where
 * the engines load it).
 */
export function reserveLocalRetry(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  at: number,
): Reserved {
  const own = plan.decode?.candidates.find((c) => c.id === instanceId)?.prefixTokens ?? 0;
  const pool = { prefixTokens: plan.poolPrefixTokens, loads: poolLoadsOf(runtime.config.kv) };
  const uncached = localUncachedTokens(plan.promptTokens, own, pool);
  return localLease(runtime, plan, instanceId, uncached, at);
}

/**
 * The decode instance's lease for the tokens it computes, bound for its batch from now on
 * (committed and predicted admission judge it) until its first token makes it a decoding one.
 */
function localLease(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  uncached: number,
  at: number,
): Reserved {
  runtime.cluster.recentPrefill.record(uncached, at);
  const forget = predictWrites(runtime, plan, instanceId);
  const lease = runtime.cluster.account.lease(instanceId, uncached, { sequences: plan.sequences });
  const localTtftS = plan.decode?.localPrefill?.localTtftS ?? 0;
  const arrives = runtime.decodeOutlook?.expect(instanceId, at + localTtftS * 1000, {
    leasedAsDecode: false,
    sequences: plan.sequences,
  });
  return { lease: arrives ? arrivingWith(lease, arrives) : lease, forget };
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
  const arrives = runtime.decodeOutlook?.expect(id, at + (plan.predictedTtftS ?? 0) * 1000, {
    sequences: plan.sequences,
  });
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

/** A lease on an instance, and what takes back its predicted KV writes. */
export interface Reserved {
  lease: LoadLease;
  forget: () => void;
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
  const forget = predictWrites(runtime, plan, instanceId);
  const lease = runtime.cluster.account.lease(instanceId, uncached, { sequences: plan.sequences });
  return { lease, forget };
}

/**
 * Records that the instance is writing the plan's keys; returns what takes that record back (the
 * instance will not write them after all), so followers are not sent after it.
 */
function predictWrites(runtime: ModelRuntime, plan: DispatchPlan, instanceId: string): () => void {
  const predicted = runtime.predicted;
  if (plan.keys.length === 0 || !predicted) return () => {};
  const writer = { instanceId, kvHost: plan.entries.get(instanceId)?.config.kvHost };
  const recordedAt = predicted.record(plan.keys, writer);
  let forgotten = false; // once: each forget takes back one claim
  return () => {
    if (!forgotten) predicted.forget(plan.keys, instanceId, recordedAt);
    forgotten = true;
  };
}

/** Prompt tokens the chosen instance has to compute, given what the policy planned to reuse. */
export function uncachedTokens(plan: DispatchPlan, instanceId: string): number {
  return Math.max(0, plan.promptTokens - reusedTokens(plan, instanceId));
}

/**
 * Prompt tokens the instance does not compute: its own prefix and the transfer the policy
 * planned, or, where its engine loads the store's part by itself (`kv.poolLoads`), the store's
 * prefix if that is longer (a policy without transfers plans none, but the engine loads it).
 */
export function reusedTokens(plan: DispatchPlan, instanceId: string): number {
  const candidate = plan.candidates.find((c) => c.id === instanceId);
  const planned = (candidate?.localPrefixTokens ?? 0) +
    (scoreOf(plan, instanceId)?.transferTokens ?? 0);
  return Math.max(planned, predictedReuseTokens(plan, instanceId));
}

export function scoreOf(plan: DispatchPlan, instanceId: string): CandidateScore | undefined {
  return plan.decision.scores.find((s) => s.id === instanceId);
}

/** `lease`, whose first token or end also ends the request's expected arrival (`arrives`). */
function arrivingWith(lease: LoadLease, arrives: () => void): LoadLease {
  return {
    instanceId: lease.instanceId,
    prefillTokens: lease.prefillTokens,
    sequences: lease.sequences,
    firstToken() {
      lease.firstToken();
      arrives();
    },
    release() {
      lease.release();
      arrives();
    },
    get released() {
      return lease.released;
    },
  };
}
