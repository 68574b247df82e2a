/**
 * The flow-control queues, one per model (docs/flow_control.md): a request admission refused, or
 * late binding held, waits here and is re-planned in the queue's order (up to REPLAN_WINDOW a
 * pass, so one that does not fit holds nobody back) whenever a request or its prefill ends and
 * every `recheckMs`, until it is admitted, its deadline passes, its client leaves or the router
 * drains. The order is the pure FlowQueue's (src/scheduling/flow_queue.ts); this file owns the
 * timers and the waiting.
 */
import type { Timers } from "../cluster/timers.ts";
import type { QueueConfig } from "../config/schema.ts";
import { type FlowEntry, FlowQueue } from "../scheduling/flow_queue.ts";
import { REPLAN_WINDOW } from "../scheduling/queue_rules.ts";

/** What the queue itself reads of `slo.queue` (when to admit is the caller's re-plan's). */
type QueueBounds = Pick<QueueConfig, "maxRequests" | "maxPromptTokens" | "recheckMs">;

/** How a wait ended. */
export type WaitOutcome =
  | { kind: "admitted" }
  | { kind: "full" }
  /** Made room, in a full queue, for a more urgent request. */
  | { kind: "pushed_out" }
  | { kind: "expired" }
  | { kind: "aborted" }
  | { kind: "shutting_down" }
  | { kind: "failed"; error: unknown };

export interface WaitRequest {
  priority: number;
  tenant: string;
  weight: number;
  promptTokens: number;
  /** When it leaves unserved, monotonic ms (src/scheduling/queue_rules.ts `waitDeadlineMs`). */
  deadlineMs: number;
  /** Aborts when the client leaves. */
  signal?: AbortSignal;
  /** Plans the request again; true when admitted (the caller keeps the plan), false to wait on. */
  replan: () => Promise<boolean>;
}

interface Waiter {
  request: WaitRequest;
  settle: (outcome: WaitOutcome) => void;
}

interface ModelQueue {
  queue: FlowQueue<Waiter>;
  recheckMs: number;
  pumping: boolean;
  /** Woken while a re-plan ran: look again before sleeping. */
  woken: boolean;
  timer?: unknown;
  /** When the armed timer fires (monotonic ms). */
  timerAt?: number;
}

export interface FlowControlDeps {
  now: () => number;
  timers: Timers;
  /** Aborts when the router starts draining: every waiting request is answered at once. */
  draining: AbortSignal;
}

export class FlowControl {
  readonly #queues = new Map<string, ModelQueue>();

  constructor(readonly deps: FlowControlDeps) {
    deps.draining.addEventListener("abort", () => this.#flushAll(), { once: true });
  }

  /** Requests waiting for `model`. */
  waiting(model: string): number {
    return this.#queues.get(model)?.queue.size ?? 0;
  }

  /** Waiting requests per model and band (the queue-length gauge). */
  lengths(): Map<string, Map<number, number>> {
    const lengths = new Map<string, Map<number, number>>();
    for (const [model, q] of this.#queues) lengths.set(model, q.queue.lengths());
    return lengths;
  }

  /** Waits for admission in `model`'s queue (sized by `config`, read again at every wait). */
  wait(model: string, config: QueueBounds, request: WaitRequest): Promise<WaitOutcome> {
    if (this.deps.draining.aborted) return Promise.resolve({ kind: "shutting_down" });
    if (request.signal?.aborted) return Promise.resolve({ kind: "aborted" });
    const q = this.#queueOf(model, config);
    const now = this.deps.now();
    return new Promise<WaitOutcome>((resolve) => {
      const waiter: Waiter = { request, settle: () => {} };
      const entry: FlowEntry<Waiter> = {
        item: waiter,
        priority: request.priority,
        tenant: request.tenant,
        weight: request.weight,
        promptTokens: request.promptTokens,
        deadline: request.deadlineMs,
        enqueuedAt: now,
      };
      const verdict = q.queue.push(entry);
      if (!verdict.queued) return resolve({ kind: "full" });
      for (const out of verdict.displaced) out.item.settle({ kind: "pushed_out" });
      const onAbort = () => {
        if (!q.queue.remove(entry)) return;
        waiter.settle({ kind: "aborted" });
        this.#schedule(q); // its deadline may have been the timer's
      };
      waiter.settle = (outcome) => {
        request.signal?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      request.signal?.addEventListener("abort", onAbort, { once: true });
      this.#schedule(q);
    });
  }

  /** Something freed capacity on `model` (a request or a prefill ended): re-plan its queue now. */
  wake(model: string): void {
    const q = this.#queues.get(model);
    if (q && q.queue.size > 0) void this.#pump(q);
  }

  #queueOf(model: string, config: QueueBounds): ModelQueue {
    let q = this.#queues.get(model);
    if (!q) {
      q = {
        queue: new FlowQueue(config),
        recheckMs: config.recheckMs,
        pumping: false,
        woken: false,
      };
      this.#queues.set(model, q);
    }
    // A reload resizes the queue; who waits keeps their place.
    q.queue.limits = { maxRequests: config.maxRequests, maxPromptTokens: config.maxPromptTokens };
    q.recheckMs = config.recheckMs;
    return q;
  }

  /**
   * Re-plans waiting requests in the queue's order, taking each admitted one out; a pass stops
   * after REPLAN_WINDOW refusals, and runs again if woken meanwhile. One pass at a time per model.
   */
  async #pump(q: ModelQueue): Promise<void> {
    if (q.pumping) {
      q.woken = true;
      return;
    }
    q.pumping = true;
    try {
      do {
        q.woken = false;
        await this.#pass(q);
      } while (q.woken);
    } finally {
      q.pumping = false;
      this.#schedule(q);
    }
  }

  async #pass(q: ModelQueue): Promise<void> {
    const refused = new Set<FlowEntry<Waiter>>();
    while (refused.size < REPLAN_WINDOW) {
      this.#expire(q);
      const next = q.queue.peek(refused);
      if (!next) return;
      const admitted = await this.#replan(q, next);
      if (admitted === undefined) continue; // left while re-planned, or failed
      if (admitted) {
        q.queue.take(next);
        next.item.settle({ kind: "admitted" });
      } else refused.add(next);
    }
  }

  /** A re-plan: undefined when the request is no longer waiting (it left, or planning threw). */
  async #replan(q: ModelQueue, head: FlowEntry<Waiter>): Promise<boolean | undefined> {
    try {
      const admitted = await head.item.request.replan();
      return q.queue.has(head) ? admitted : undefined;
    } catch (error) {
      if (q.queue.remove(head)) head.item.settle({ kind: "failed", error });
      return undefined;
    }
  }

  #expire(q: ModelQueue): void {
    for (const entry of q.queue.expired(this.deps.now())) {
      q.queue.remove(entry);
      entry.item.settle({ kind: "expired" });
    }
  }

  /**
   * One timer per queue: the next recheck, or the next expiry if sooner. An armed timer that is
   * due sooner stays, so arrivals cannot keep pushing the recheck back.
   */
  #schedule(q: ModelQueue): void {
    const { timers } = this.deps;
    if (q.queue.size === 0 || q.pumping) {
      this.#disarm(q);
      return;
    }
    const now = this.deps.now();
    const untilExpiry = (q.queue.nextDeadline() ?? Infinity) - now;
    const at = now + Math.max(0, Math.min(q.recheckMs, untilExpiry));
    if (q.timer !== undefined && q.timerAt! <= at) return;
    this.#disarm(q);
    q.timerAt = at;
    q.timer = timers.setTimeout(() => {
      q.timer = q.timerAt = undefined;
      void this.#pump(q);
    }, at - now);
  }

  #disarm(q: ModelQueue): void {
    if (q.timer !== undefined) this.deps.timers.clearTimeout(q.timer);
    q.timer = q.timerAt = undefined;
  }

  #flushAll(): void {
    for (const q of this.#queues.values()) {
      for (const entry of q.queue.entries()) {
        q.queue.remove(entry);
        entry.item.settle({ kind: "shutting_down" });
      }
      this.#schedule(q);
    }
  }
}
