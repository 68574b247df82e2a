/**
 * The simulator's flow-control queue: the router's own FlowQueue (src/scheduling/flow_queue.ts)
 * and rules (src/scheduling/queue_rules.ts) driven on simulated time the way
 * src/gateway/flow_control.ts drives them on the wall clock. A request the TTFT admission refuses
 * waits if an idle instance could still serve it within the SLO; waiting requests are re-planned
 * in order whenever something changes (a prefill finished, a deadline passed, someone joined),
 * past up to REPLAN_WINDOW that do not fit, and leave once their TTFT fits what their wait left of
 * the SLO (and, with `idle`, their instance has no prefill waiting); at their deadline (the SLO
 * since arrival, or the TTL) they are out, a 429. Times are in seconds.
 */
import { QueueSchema } from "../config/schema.ts";
import { type FlowEntry, FlowQueue, type FlowQueueLimits } from "../scheduling/flow_queue.ts";
import {
  admitsFromQueue,
  type QueueAdmitWhen,
  REPLAN_WINDOW,
  waitDeadlineMs,
} from "../scheduling/queue_rules.ts";
import type { AdmissionRefusal } from "../scheduling/admission.ts";
import type { Candidate } from "../scheduling/types.ts";

export interface SimQueueConfig extends FlowQueueLimits {
  /** Seconds a request may wait before it is refused (the router's `slo.queue.ttlS`). */
  ttlS: number;
  /** When a waiting request goes (the router's `slo.queue.admitWhen`). */
  admitWhen: QueueAdmitWhen;
}

const ROUTER_QUEUE = QueueSchema.parse({});

/** The router's defaults (src/config/model_schema.ts). */
export const DEFAULT_SIM_QUEUE: SimQueueConfig = {
  ttlS: ROUTER_QUEUE.ttlS,
  admitWhen: ROUTER_QUEUE.admitWhen,
  maxRequests: ROUTER_QUEUE.maxRequests,
  maxPromptTokens: ROUTER_QUEUE.maxPromptTokens,
};

export interface QueuedRequest {
  index: number;
  priority: number;
  tenant: string;
  promptTokens: number;
  /** Why admission refused it (the `cause` rule reads it on each re-plan). */
  refusedFor: AdmissionRefusal["reason"];
}

export class SimQueue {
  readonly #queue: FlowQueue<number>;
  readonly #ttlS: number;
  readonly #ttftSloS: number | undefined;
  /** Per request: seconds waited until admitted or expired; NaN when it never waited. */
  readonly waitS: Float64Array;
  /** Requests whose deadline passed while waiting, in the order they expired. */
  readonly expired: number[] = [];
  /** Requests a more urgent one pushed out of a full queue (a 429 `queue_full`). */
  readonly displaced: number[] = [];
  readonly #refusedFor = new Map<number, AdmissionRefusal["reason"]>();

  constructor(requests: number, config: SimQueueConfig, ttftSloS?: number) {
    this.#queue = new FlowQueue({
      maxRequests: config.maxRequests,
      maxPromptTokens: config.maxPromptTokens,
    });
    this.#ttlS = config.ttlS;
    this.#ttftSloS = ttftSloS;
    this.waitS = new Float64Array(requests).fill(NaN);
  }

  get size(): number {
    return this.#queue.size;
  }

  /** Queues `request`, arrived and joining at `nowS`: its deadline, or undefined when full. */
  push(request: QueuedRequest, nowS: number): number | undefined {
    const at = { arrivedMs: nowS * 1000, joinedMs: nowS * 1000 };
    const deadline = waitDeadlineMs(at, this.#ttlS, this.#ttftSloS) / 1000;
    const verdict = this.#queue.push({
      item: request.index,
      priority: request.priority,
      tenant: request.tenant,
      weight: 1,
      promptTokens: request.promptTokens,
      deadline,
      enqueuedAt: nowS,
    });
    if (!verdict.queued) return undefined;
    this.#refusedFor.set(request.index, request.refusedFor);
    for (const out of verdict.displaced) {
      this.waitS[out.item] = nowS - out.enqueuedAt;
      this.displaced.push(out.item);
    }
    return deadline;
  }

  /**
   * Expires what is due, then re-plans in the queue's order: `tryAdmit(index, waitedS,
   * refusedFor)` plans the request and dispatches it when it fits; a pass stops after
   * REPLAN_WINDOW that do not.
   */
  pump(
    nowS: number,
    tryAdmit: (index: number, waitedS: number, refusedFor: AdmissionRefusal["reason"]) => boolean,
  ): void {
    for (const entry of this.#queue.expired(nowS)) this.#expire(entry, nowS);
    const refused = new Set<FlowEntry<number>>();
    for (let next = this.#queue.peek(refused); next; next = this.#queue.peek(refused)) {
      if (tryAdmit(next.item, nowS - next.enqueuedAt, this.#refusedFor.get(next.item)!)) {
        this.#queue.take(next);
        this.waitS[next.item] = nowS - next.enqueuedAt;
      } else if (refused.add(next).size >= REPLAN_WINDOW) return;
    }
  }

  #expire(entry: FlowEntry<number>, nowS: number): void {
    this.#queue.remove(entry);
    // Expired at its deadline (the subtraction could round past it).
    this.waitS[entry.item] = Math.min(nowS - entry.enqueuedAt, entry.deadline - entry.enqueuedAt);
    this.expired.push(entry.item);
  }
}

/**
 * The router's admission of a re-planned request after `waitedS` in the queue
 * (queue_rules.ts `admitsFromQueue`), for a plan that chose `chosenId` predicting `predictedTtftS`.
 */
export function admitsAfterWait(
  admitWhen: QueueAdmitWhen,
  plan: { predictedTtftS: number; chosenId: string; candidates: readonly Candidate[] },
  waitedS: number,
  ttftSloS: number | undefined,
  refusedFor: AdmissionRefusal["reason"],
): boolean {
  const chosen = {
    predictedTtftS: plan.predictedTtftS,
    waitingPrefillTokens: plan.candidates.find((c) => c.id === plan.chosenId)
      ?.waitingPrefillTokens,
  };
  return admitsFromQueue(admitWhen, chosen, waitedS, ttftSloS, refusedFor);
}
