/**
 * Router replicas share their dispatch-time facts through a pub/sub channel (Redis in
 * production: redis_pubsub.ts). Off the request path: a lease or prediction only queues a fact,
 * sent once per event-loop turn; other replicas' facts are applied as they arrive
 * (remote_facts.ts). Every `heartbeatMs` a replica publishes a snapshot of its live leases
 * (lease_snapshot.ts), which repairs ends and leases the others missed. When the channel fails,
 * each replica keeps its own view (counted, logged once per outage); back online, it publishes
 * its snapshot at once and asks the others for theirs, so views converge without waiting a period.
 */
import type { LeaseListener, LoadAccount, LoadLease } from "./load_account.ts";
import type { ResponseHomes } from "./response_homes.ts";
import { snapshotParts } from "./lease_snapshot.ts";
import { PeriodicTask } from "./periodic_task.ts";
import type { RemoteFacts } from "./remote_facts.ts";
import { decodeBatch, encodeBatch, type Fact, type FactBatch } from "./shared_facts.ts";
import { systemTimers, type Timers } from "./timers.ts";

export interface PubSub {
  publish(message: string): Promise<void>;
  /** Calls `onMessage` for every message on the channel (this replica's own included). */
  subscribe(onMessage: (message: string) => void): Promise<void>;
  /** Called when the connection (publishing and subscribed) comes back after a failure. */
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
  /** Period of the snapshot (the heartbeat) and of the sweep of silent replicas. */
  heartbeatMs?: number;
  timers?: Timers;
  /** Monotonic milliseconds. */
  now?: () => number;
}

interface LiveEntry {
  model: string;
  lease: LoadLease;
  id: number;
  decoding: boolean;
}

export class SharedState {
  readonly #options: SharedStateOptions;
  readonly #timers: Timers;
  readonly #live = new Map<LoadLease, LiveEntry>();
  readonly #heartbeat: PeriodicTask;
  #queue: Fact[] = [];
  #flushTimer: unknown;
  #snapshotTimer: unknown;
  #nextId = 0;
  #down = false;
  readonly counts = { published: 0, received: 0, errors: 0, rejected: 0, snapshots: 0 };

  constructor(options: SharedStateOptions) {
    this.#options = options;
    this.#timers = options.timers ?? systemTimers();
    this.#heartbeat = new PeriodicTask(
      () => this.#beat(),
      options.heartbeatMs ?? 5_000,
      this.#timers,
      options.now ?? (() => performance.now()),
    );
  }

  /**
   * Starts the heartbeat and subscribes in the background: a replica never waits on the channel,
   * so one started while Redis is down serves on its own view until it answers. Once subscribed
   * (and after every reconnection) it asks the others to catch it up.
   */
  start(): void {
    this.#options.pubsub.onReconnect(() => void this.#publishSnapshot(true));
    this.#heartbeat.start();
    // The client reconnects and resubscribes by itself; a failure here is only counted.
    this.#options.pubsub.subscribe((message) => this.#received(message))
      .then(() => this.#publishSnapshot(true), (error) => this.#failed(error));
  }

  /** Publishes the homes of the Responses API responses this replica relays from now on. */
  attachHomes(homes: Pick<ResponseHomes, "observe">): void {
    homes.observe((id, home) =>
      this.#queueFact({ k: "home", model: home.model, id, instance: home.instanceId })
    );
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
    snapshots: number;
    remoteLeases: number;
    lostEnds: number;
    lostLeases: number;
    silentReplicas: number;
  } {
    const remote = this.#options.remote;
    return { ...this.counts, remoteLeases: remote.remoteLeases, ...remote.repairs };
  }

  async close(): Promise<void> {
    await this.#heartbeat.stop();
    this.#timers.clearTimeout(this.#flushTimer);
    this.#timers.clearTimeout(this.#snapshotTimer);
    await this.#options.pubsub.close();
  }

  #leaseListener(model: string): LeaseListener {
    return {
      leased: (lease) => {
        const live = { model, lease, id: this.#nextId++, decoding: false };
        this.#live.set(lease, live);
        this.#queueFact({
          k: "lease",
          model,
          instance: lease.instanceId,
          id: `${live.id}`,
          tokens: lease.prefillTokens,
          ...sequencesField(lease),
        });
      },
      firstToken: (lease) => {
        const live = this.#live.get(lease);
        if (!live) return;
        live.decoding = true;
        this.#queueFact({ k: "first", model, id: `${live.id}` });
      },
      released: (lease) => {
        const live = this.#live.get(lease);
        this.#live.delete(lease);
        if (live) this.#queueFact({ k: "end", model, id: `${live.id}` });
      },
    };
  }

  #queueFact(fact: Fact): void {
    this.#queue.push(fact);
    if (this.#flushTimer !== undefined) return;
    this.#flushTimer = this.#timers.setTimeout(() => this.#flush(), 0);
  }

  /** Sends the queued facts now (at the latest on the next turn). */
  #flush(): void {
    this.#timers.clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#queue.length === 0) return;
    const facts = this.#queue;
    this.#queue = [];
    this.#send({ v: 1, replica: this.#options.replica, facts });
  }

  /** One heartbeat: drop replicas gone silent, then tell the others which leases are out. */
  #beat(): Promise<void> {
    this.#options.remote.sweep();
    return this.#publishSnapshot(false);
  }

  /** Publishes the live leases in bounded parts; `catchUp` asks the others for theirs. */
  #publishSnapshot(catchUp: boolean): Promise<void> {
    // Facts still queued go first, so the snapshot never looks like a repair of them.
    this.#flush();
    const live = [...this.#live.values()].map(({ model, lease, id, decoding }) => ({
      model,
      instance: lease.instanceId,
      id: `${id}`,
      tokens: lease.prefillTokens,
      ...sequencesField(lease),
      decoding,
    }));
    const parts = snapshotParts(live, this.#nextId);
    const replica = this.#options.replica;
    return Promise.all(parts.map((part, i) => {
      const batch: FactBatch = { v: 1, replica, facts: [], live: part };
      if (catchUp && i === 0) batch.catchUp = true;
      return this.#send(batch).then((sent) => void (this.counts.snapshots += sent ? 1 : 0));
    })).then(() => {});
  }

  /** Another replica asked: one snapshot on the next turn answers every ask of this one. */
  #answerCatchUp(): void {
    if (this.#snapshotTimer !== undefined) return;
    this.#snapshotTimer = this.#timers.setTimeout(() => {
      this.#snapshotTimer = undefined;
      void this.#publishSnapshot(false);
    }, 0);
  }

  /** Publishes `batch` within `timeoutMs`; resolves to whether it went out (never rejects). */
  #send(batch: FactBatch): Promise<boolean> {
    let timer: unknown;
    const timeout = new Promise<never>((_, reject) => {
      timer = this.#timers.setTimeout(
        () => reject(new Error(`publish took over ${this.#options.timeoutMs} ms`)),
        this.#options.timeoutMs,
      );
    });
    return Promise.race([this.#options.pubsub.publish(encodeBatch(batch)), timeout]).then(
      () => {
        this.#succeeded(batch.facts.length);
        return true;
      },
      (error) => {
        this.#failed(error);
        return false;
      },
    ).finally(() => this.#timers.clearTimeout(timer));
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
    if (batch.catchUp) this.#answerCatchUp();
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
      level: "warn",
      error: (error as Error)?.message ?? String(error),
    });
  }
}

type Writer = { instanceId: string; kvHost?: string };

/** `seqs` only when more than one: a one-sequence lease reads the same to older replicas. */
function sequencesField(lease: LoadLease): { seqs?: number } {
  return lease.sequences > 1 ? { seqs: lease.sequences } : {};
}
