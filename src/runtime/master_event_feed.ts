import { PeriodicTask } from "../cluster/periodic_task.ts";
import type { Timers } from "../cluster/timers.ts";
import { decodeMasterKvMessage } from "../kv/events/master_kv_event.ts";
import type { PoolMirror } from "../kv/events/pool_mirror.ts";
import {
  decodeCounting,
  type KvEventSockets,
  type KvEventSubscription,
} from "./engine_event_feed.ts";

/**
 * Feeds the Mooncake master's KV events into the pool mirror (src/kv/events/pool_mirror.ts).
 * The master keeps no replay buffer, so the mirror is rebuilt from a snapshot of its keys
 * (`GET /get_all_keys`, `snapshot`) whenever it cannot be trusted: each time the subscription
 * (re)connects, after a gap, and every `resyncIntervalMs` while untrusted. Losing the publisher
 * makes the mirror untrusted at once: the router asks the master per request until the next
 * snapshot. Edge: sockets, the snapshot reader and timers are passed in.
 */
export interface MasterEventFeedOptions {
  endpoint: string;
  topic?: string;
  mirror: PoolMirror;
  sockets: KvEventSockets;
  /** The master's keys now, or null when they cannot be read. */
  snapshot: () => Promise<string[] | null>;
  timers: Timers;
  now: () => number;
  resyncIntervalMs?: number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

export class MasterEventFeed {
  readonly #options: MasterEventFeedOptions;
  readonly #retry: PeriodicTask;
  #subscription: KvEventSubscription | undefined;
  #reading: Promise<void> | undefined;
  #snapshotting: Promise<void> | undefined;
  /** A resync was asked for while a snapshot was being read: read the keys once more after it. */
  #again = false;
  #stopped = false;
  /** Messages that were not KV event batches. */
  decodeErrors = 0;

  constructor(options: MasterEventFeedOptions) {
    this.#options = options;
    this.#retry = new PeriodicTask(
      async () => {
        if (options.mirror.state === "untrusted" && !options.mirror.snapshotting) {
          await this.#resync();
        }
      },
      options.resyncIntervalMs ?? 30_000,
      options.timers,
      options.now,
    );
  }

  start(): void {
    const { sockets, endpoint, topic, mirror } = this.#options;
    this.#subscription = sockets.subscribe(endpoint, topic ?? "", {
      // Whatever was published while not connected is unknown: read the keys again.
      onConnect: () => void this.#resync(),
      onDisconnect: () => mirror.invalidate(),
    });
    this.#reading = this.#read(this.#subscription);
    this.#retry.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#subscription?.close();
    await Promise.all([this.#retry.stop(), this.#reading, this.#snapshotting]);
  }

  async #read(subscription: KvEventSubscription): Promise<void> {
    for await (const frames of subscription) {
      const batch = decodeCounting(
        frames,
        decodeMasterKvMessage,
        this,
        (error) =>
          this.#options.log("the master's KV events: a message is not a batch", {
            level: "warn",
            error,
          }),
      );
      if (batch && this.#options.mirror.receive(batch)) void this.#resync();
    }
  }

  /**
   * One snapshot at a time; batches arriving meanwhile are held by the mirror. Asked again while
   * one is read (a reconnect during it, whose disconnect made that snapshot stale), it reads the
   * keys once more after it instead of leaving the mirror untrusted until the timer.
   */
  #resync(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#again = true;
    // The loop's first round awaits, so its `finally` cannot run before this assignment.
    this.#snapshotting ??= this.#readSnapshots();
    return this.#snapshotting;
  }

  async #readSnapshots(): Promise<void> {
    const { mirror, snapshot } = this.#options;
    try {
      while (this.#again && !this.#stopped) {
        this.#again = false;
        const ticket = mirror.beginSnapshot();
        const keys = await snapshot().catch(() => null);
        if (!this.#stopped) mirror.snapshot(keys, ticket);
      }
    } finally {
      this.#snapshotting = undefined;
    }
  }
}
