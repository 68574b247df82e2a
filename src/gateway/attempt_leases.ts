import type { BreakerPermit, FailureKind } from "../cluster/circuit_breaker.ts";
import type { LoadLease } from "../cluster/load_account.ts";
import type { AttemptTrace, DispatchPlan, RequestTrace } from "../contracts.ts";
import type {
  AttemptFailure,
  AttemptRecord,
  ForwardHooks,
  ForwardOutcome,
  ForwardTarget,
} from "../proxy/forward.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import {
  decodeLease,
  type Reservation,
  reserve,
  type Reserved,
  reserveLocalRetry,
} from "./reservation.ts";

/** A `not_served` attempt is no failure of the engine: it is left out. */
const BREAKER_KIND: Record<Exclude<AttemptFailure, "not_served">, FailureKind> = {
  connect_error: "connect",
  connection_dropped: "connect",
  timeout: "timeout",
  http_5xx: "http_5xx",
};

/** What one attempt on an instance holds until its response ends. */
export interface HeldAttempt {
  permit: BreakerPermit;
  lease: LoadLease;
  /** Marks the request finished on the instance (draining, admin view). */
  end: () => void;
  /** Takes back the attempt's predicted KV writes (it failed before it could write them). */
  forget: () => void;
}

/**
 * The hooks around each upstream attempt: a breaker permit, a load lease (the reservation's on
 * its instance, else a fresh one) and a span per attempt; a failed attempt gives all three back
 * and its predicted KV writes. Every lease is released exactly once (`release`).
 */
export class AttemptLeases {
  readonly #held = new Map<string, HeldAttempt>();
  #attemptTrace?: AttemptTrace;
  #attemptNumber = 0;
  /** 5xx answers and dropped connections whose breaker verdict waits for the request's outcome. */
  readonly #pendingErrors: { permit: BreakerPermit; kind: FailureKind; detail: string }[] = [];

  constructor(
    readonly runtime: ModelRuntime,
    readonly plan: DispatchPlan,
    readonly reservation: Reservation | undefined,
    readonly upstreamHeaders: Headers,
    readonly now: () => number,
    readonly trace?: RequestTrace,
    /** The P/D leg these attempts are: a decode leg holds a decode slot, not prompt tokens. */
    readonly leg?: "prefill" | "decode",
  ) {}

  #lease(instanceId: string): Reserved {
    if (this.leg === "decode") {
      return {
        lease: decodeLease(this.runtime, instanceId, this.plan.sequences),
        forget: () => {},
      };
    }
    // A local prefill goes down the decode ranking: another decode instance prefills it then.
    return this.plan.decode?.localPrefill?.local
      ? reserveLocalRetry(this.runtime, this.plan, instanceId, this.now())
      : reserve(this.runtime, this.plan, instanceId, this.now());
  }

  /** The attempt on `instanceId` that produced the response, if it still holds its lease. */
  held(instanceId: string): HeldAttempt | undefined {
    return this.#held.get(instanceId);
  }

  /** Gives back what the attempt on `instanceId` holds (once; later calls do nothing). */
  release(instanceId: string): void {
    const held = this.#held.get(instanceId);
    if (!held) return;
    this.#held.delete(instanceId);
    held.lease.release();
    held.end();
  }

  releaseAll(): void {
    for (const id of [...this.#held.keys()]) this.release(id);
  }

  /** `fetch` run inside the current attempt's span, so the engine continues the trace. */
  tracedFetch(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
    return (input, init) => {
      const attempt = this.#attemptTrace;
      return attempt ? attempt.run(() => fetch(input, init)) : fetch(input, init);
    };
  }

  hooks(): ForwardHooks {
    return {
      beforeAttempt: (target) => this.#before(target),
      afterAttempt: (target, attempt) => this.#after(target, attempt),
      afterAll: (_attempts, outcome) => this.#settleEngineErrors(outcome),
    };
  }

  /**
   * An engine's 5xx, or a connection it dropped after taking the request, is its fault only when
   * another instance then answered the same request: a request every engine refuses or chokes on
   * (a poison request) must not open healthy instances' breakers.
   */
  #settleEngineErrors(outcome: ForwardOutcome["kind"]): void {
    const pending = this.#pendingErrors.splice(0);
    for (const { permit, kind, detail } of pending) {
      if (outcome === "response") permit.failure(kind, detail);
      else permit.release();
    }
  }

  #before(target: ForwardTarget): boolean {
    const cluster = this.runtime.cluster;
    const entry = cluster.get(target.id);
    const permit = entry?.breaker.tryAcquire();
    if (!entry || !permit) {
      // Its breaker opened since the decision: the reserved work and KV go elsewhere.
      if (this.reservation?.instanceId === target.id) this.reservation.cancel();
      return false;
    }
    this.#attemptTrace = this.trace?.attempt(
      target,
      ++this.#attemptNumber,
      this.upstreamHeaders,
      this.leg,
    );
    const reserved = this.reservation?.instanceId === target.id
      ? this.reservation.take()
      : undefined;
    const { lease, forget } = reserved ?? this.#lease(target.id);
    this.#held.set(target.id, { permit, lease, end: cluster.begin(target.id), forget });
    return true;
  }

  #after(target: ForwardTarget, attempt: AttemptRecord): void {
    if (this.leg) attempt.leg = this.leg;
    this.#attemptTrace?.end(attempt, attempt.failure !== undefined);
    this.#attemptTrace = undefined;
    const held = this.#held.get(target.id);
    if (!held) return;
    if (attempt.failure === "not_served") {
      held.permit.success();
      this.release(target.id);
    } else if (attempt.failure) {
      const detail = `${target.url}: ${attempt.error}`;
      const kind = BREAKER_KIND[attempt.failure];
      const judgedLater = attempt.failure === "http_5xx" ||
        attempt.failure === "connection_dropped";
      if (judgedLater) this.#pendingErrors.push({ permit: held.permit, kind, detail });
      else held.permit.failure(kind, detail);
      this.release(target.id);
      if (this.leg !== "decode") held.forget(); // a decode slot's undo is its arrival
    } else if (attempt.status === undefined) {
      held.permit.release(); // the client left: no verdict on the instance
      this.release(target.id);
    } else {
      held.permit.success();
    }
  }
}
