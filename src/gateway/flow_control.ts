/**
 * The flow-control queues, one per model (docs/flow_control.md): a request admission refused
 * waits here and is re-planned, head first, whenever a request ends and every `recheckMs`, until
 * it is admitted, its TTL passes, its client leaves or the router drains. The order is the pure
 * FlowQueue's (src/scheduling/flow_queue.ts); this file owns the timers and the waiting.
 */
import type { Timers } from "../cluster/timers.ts";
import type { QueueConfig } from "../config/schema.ts";
import { type FlowEntry, FlowQueue } from "../scheduling/flow_queue.ts";

/** How a wait ended. */
export type WaitOutcome =
  | { kind: "admitted" }
  | { kind: "full"; limit: "requests" | "prompt_tokens" }
  | { kind: "expired" }
  | { kind: "aborted" }
  | { kind: "shutting_down" }
  | { kind: "failed"; error: unknown };

export interface WaitRequest {
  priority: number;
  tenant: string;
  weight: number;
  promptTokens: number;
  /** Seconds it may wait (the config's TTL, or less if the client asked). */
  ttlS: number;
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

  /** The most urgent band waiting for `model`, if any. */
  headPriority(model: string): number | undefined {
    return this.#queues.get(model)?.queue.peek()?.priority;
  }

  /** Waits for admission in `model`'s queue (sized by `config`, read again at every wait). */
  wait(model: string, config: QueueConfig, request: WaitRequest): Promise<WaitOutcome> {
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
        deadline: now + request.ttlS * 1000,
        enqueuedAt: now,
      };
      const verdict = q.queue.push(entry);
      if (!verdict.queued) return resolve({ kind: "full", limit: verdict.limit });
      const onAbort = () => {
        if (q.queue.remove(entry)) waiter.settle({ kind: "aborted" });
      };
      waiter.settle = (outcome) => {
        request.signal?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      request.signal?.addEventListener("abort", onAbort, { once: true });
      this.#schedule(q);
    });
  }

  /** Something freed capacity on `model` (a request ended): re-plan its queue's head now. */
  wake(model: string): void {
    const q = this.#queues.get(model);
    if (q && q.queue.size > 0) void this.#pump(q);
  }

  #queueOf(model: string, config: QueueConfig): ModelQueue {
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

  /** Re-plans from the head while requests are admitted; one pass at a time per model. */
  async #pump(q: ModelQueue): Promise<void> {
    if (q.pumping) {
      q.woken = true;
      return;
    }
    q.pumping = true;
    try {
      for (;;) {
        q.woken = false;
        this.#expire(q);
        const head = q.queue.peek();
        if (!head) break;
        const admitted = await this.#replan(q, head);
        if (admitted === undefined) continue; // left while re-planned, or failed
        if (admitted) {
          q.queue.take(head);
          head.item.settle({ kind: "admitted" });
          continue;
        }
        if (!q.woken) break;
      }
    } finally {
      q.pumping = false;
      this.#schedule(q);
    }
  }

  /** The head's re-plan: undefined when it is no longer waiting (it left, or planning threw). */
  async #replan(q: ModelQueue, head: FlowEntry<Waiter>): Promise<boolean | undefined> {
    try {
      const admitted = await head.item.request.replan();
      if (q.queue.entries().includes(head)) return admitted;
      return undefined;
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

  /** One timer per queue: the next recheck, or the next expiry if sooner. */
  #schedule(q: ModelQueue): void {
    const { timers } = this.deps;
    if (q.timer !== undefined) timers.clearTimeout(q.timer);
    q.timer = undefined;
    if (q.queue.size === 0 || q.pumping) return;
    const untilExpiry = (q.queue.nextDeadline() ?? Infinity) - this.deps.now();
    const ms = Math.max(0, Math.min(q.recheckMs, untilExpiry));
    q.timer = timers.setTimeout(() => {
      q.timer = undefined;
      void this.#pump(q);
    }, ms);
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
