/**
 * The simulator's flow-control queue: the router's own FlowQueue (src/scheduling/flow_queue.ts)
 * driven on simulated time the way src/gateway/flow_control.ts drives it on the wall clock. A
 * request the TTFT admission refuses waits, and so does a newcomer while anyone at least as urgent
 * waits; the head is re-planned whenever something changes (a prefill finished, a deadline passed,
 * someone joined) and leaves once it fits; at its TTL it is out, a 429. Times are in seconds.
 */
import { type FlowEntry, FlowQueue, type FlowQueueLimits } from "../scheduling/flow_queue.ts";

export interface SimQueueConfig extends FlowQueueLimits {
  /** Seconds a request may wait before it is refused (the router's `slo.queue.ttlS`). */
  ttlS: number;
}

/** The router's defaults (src/config/model_schema.ts). */
export const DEFAULT_SIM_QUEUE: SimQueueConfig = {
  ttlS: 30,
  maxRequests: 256,
  maxPromptTokens: 2_000_000,
};

export interface QueuedRequest {
  index: number;
  priority: number;
  tenant: string;
  promptTokens: number;
}

export class SimQueue {
  readonly #queue: FlowQueue<number>;
  readonly #ttlS: number;
  /** Per request: seconds waited until admitted or expired; NaN when it never waited. */
  readonly waitS: Float64Array;
  /** Requests whose TTL passed while waiting, in the order they expired. */
  readonly expired: number[] = [];

  constructor(requests: number, config: SimQueueConfig) {
    this.#queue = new FlowQueue({
      maxRequests: config.maxRequests,
      maxPromptTokens: config.maxPromptTokens,
    });
    this.#ttlS = config.ttlS;
    this.waitS = new Float64Array(requests).fill(NaN);
  }

  get size(): number {
    return this.#queue.size;
  }

  /** The router's rule (#mustWait): refused with 429, or someone at least as urgent waits. */
  mustWait(priority: number, refused: boolean): boolean {
    if (refused) return true;
    const head = this.#queue.peek();
    return head !== undefined && head.priority <= priority;
  }

  /** Queues `request` at `nowS`: its deadline, or undefined when a bound refuses it. */
  push(request: QueuedRequest, nowS: number): number | undefined {
    const deadline = nowS + this.#ttlS;
    const verdict = this.#queue.push({
      item: request.index,
      priority: request.priority,
      tenant: request.tenant,
      weight: 1,
      promptTokens: request.promptTokens,
      deadline,
      enqueuedAt: nowS,
    });
    return verdict.queued ? deadline : undefined;
  }

  /**
   * Expires what is due, then re-plans head first: `tryAdmit(index)` plans the head and dispatches
   * it when it fits; the first head that does not fit stops the pass (the queue is strictly
   * ordered, so a small request behind it cannot overtake it).
   */
  pump(nowS: number, tryAdmit: (index: number) => boolean): void {
    for (const entry of this.#queue.expired(nowS)) this.#expire(entry, nowS);
    for (let head = this.#queue.peek(); head; head = this.#queue.peek()) {
      if (!tryAdmit(head.item)) return;
      this.#queue.take(head);
      this.waitS[head.item] = nowS - head.enqueuedAt;
    }
  }

  #expire(entry: FlowEntry<number>, nowS: number): void {
    this.#queue.remove(entry);
    // Expired at its deadline: it waited the TTL (the subtraction could round past it).
    this.waitS[entry.item] = Math.min(nowS - entry.enqueuedAt, this.#ttlS);
    this.expired.push(entry.item);
  }
}
