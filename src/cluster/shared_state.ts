/**
 * Router replicas share their dispatch-time facts through a pub/sub channel (Redis in
 * production: redis_pubsub.ts). Off the request path: a lease or prediction only queues a fact,
 * sent once per event-loop turn; other replicas' facts are applied as they arrive
 * (remote_facts.ts). When the channel fails, each replica keeps its own view (counted, logged once
 * per outage) and, back online, republishes its live leases so the others catch up.
 */
import type { LeaseListener, LoadAccount, LoadLease } from "./load_account.ts";
import type { RemoteFacts } from "./remote_facts.ts";
import { decodeBatch, encodeBatch, type Fact } from "./shared_facts.ts";

export interface PubSub {
  publish(message: string): Promise<void>;
  /** Calls `onMessage` for every message on the channel (this replica's own included). */
  subscribe(onMessage: (message: string) => void): Promise<void>;
  /** Called when the connection comes back after a failure. */
  onReconnect(listener: () => void): void;
  close(): Promise<void>;
}

export interface SharedStateOptions {
  pubsub: PubSub;
  replica: string;
  remote: RemoteFacts;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** A publish slower than this counts as a failure. */
  timeoutMs: number;
  heartbeatMs?: number;
}

interface LiveLease {
  model: string;
  lease: LoadLease;
  id: string;
}

export class SharedState {
  readonly #options: SharedStateOptions;
  readonly #live = new Map<LoadLease, LiveLease>();
  #queue: Fact[] = [];
  #flushing = false;
  #nextId = 0;
  #down = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  readonly counts = { published: 0, received: 0, errors: 0, rejected: 0 };

  constructor(options: SharedStateOptions) {
    this.#options = options;
  }

  /**
   * Starts the heartbeat and subscribes in the background: a replica never waits on the channel,
   * so one started while Redis is down serves on its own view until it answers.
   */
  start(): void {
    this.#options.pubsub.onReconnect(() => this.#republish());
    const heartbeat = this.#options.heartbeatMs ?? 5_000;
    this.#timer = setInterval(() => {
      this.#options.remote.sweep();
      this.#send([]);
    }, heartbeat);
    // The client reconnects and resubscribes by itself; a failure here is only counted.
    this.#options.pubsub.subscribe((message) => this.#received(message))
      .catch((error) => this.#failed(error));
  }

  /** Publishes `model`'s leases and predictions from now on. */
  attach(
    model: string,
    account: LoadAccount,
    predicted?: { observe(listener: (keys: readonly string[], writer: Writer) => void): void },
  ): void {
    account.observe(this.#leaseListener(model));
    predicted?.observe((keys, writer) =>
      this.#queueFact({
        k: "keys",
        model,
        instance: writer.instanceId,
        kvHost: writer.kvHost,
        keys: [...keys],
      })
    );
  }

  /** For /metrics. */
  samples(): {
    published: number;
    received: number;
    errors: number;
    rejected: number;
    remoteLeases: number;
  } {
    return { ...this.counts, remoteLeases: this.#options.remote.remoteLeases };
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#options.pubsub.close();
  }

  #leaseListener(model: string): LeaseListener {
    return {
      leased: (lease) => {
        const live = { model, lease, id: `${this.#nextId++}` };
        this.#live.set(lease, live);
        this.#queueFact({
          k: "lease",
          model,
          instance: lease.instanceId,
          id: live.id,
          tokens: lease.prefillTokens,
        });
      },
      firstToken: (lease) => {
        const live = this.#live.get(lease);
        if (live) this.#queueFact({ k: "first", model, id: live.id });
      },
      released: (lease) => {
        const live = this.#live.get(lease);
        this.#live.delete(lease);
        if (live) this.#queueFact({ k: "end", model, id: live.id });
      },
    };
  }

  #queueFact(fact: Fact): void {
    this.#queue.push(fact);
    if (this.#flushing) return;
    this.#flushing = true;
    setTimeout(() => {
      this.#flushing = false;
      const facts = this.#queue;
      this.#queue = [];
      this.#send(facts);
    }, 0);
  }

  #send(facts: Fact[]): void {
    const message = encodeBatch({ v: 1, replica: this.#options.replica, facts });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`publish took over ${this.#options.timeoutMs} ms`)),
        this.#options.timeoutMs,
      );
    });
    Promise.race([this.#options.pubsub.publish(message), timeout]).then(
      () => this.#succeeded(facts.length),
      (error) => this.#failed(error),
    ).finally(() => clearTimeout(timer));
  }

  #received(message: string): void {
    const batch = decodeBatch(message);
    if (typeof batch === "string") {
      this.counts.rejected++;
      return;
    }
    if (batch.replica === this.#options.replica) return;
    this.counts.received++;
    this.#options.remote.apply(batch);
  }

  /** Back online: the others may have dropped this replica's leases; tell them again. */
  #republish(): void {
    const facts: Fact[] = [];
    for (const { model, lease, id } of this.#live.values()) {
      facts.push({
        k: "lease",
        model,
        instance: lease.instanceId,
        id,
        tokens: lease.prefillTokens,
      });
    }
    this.#send(facts);
  }

  #succeeded(facts: number): void {
    this.counts.published += facts;
    if (!this.#down) return;
    this.#down = false;
    this.#options.log("shared state: publishing again; replicas share their dispatches");
  }

  #failed(error: unknown): void {
    this.counts.errors++;
    if (this.#down) return;
    this.#down = true;
    this.#options.log("shared state unavailable; this replica uses its own view until it returns", {
      error: (error as Error)?.message ?? String(error),
    });
  }
}

type Writer = { instanceId: string; kvHost?: string };
