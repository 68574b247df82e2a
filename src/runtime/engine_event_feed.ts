import { PeriodicTask } from "../cluster/periodic_task.ts";
import type { Timers } from "../cluster/timers.ts";
import type { EngineBlockIndex } from "../kv/events/engine_block_index.ts";
import { decodeKvEventMessage, type EngineKvEventBatch } from "../kv/events/engine_kv_event.ts";

/**
 * Feeds one engine's KV events into its mirror (src/kv/events/engine_block_index.ts): a SUB
 * socket on the engine's publisher, and, when the mirror asks (a gap, joined mid-history, another
 * publisher met), a replay of the publisher's buffer from its ROUTER socket. Each time the
 * subscription connects, and then every `resyncIntervalMs`, it asks that socket too: for the
 * whole buffer while the mirror is not whole, from its last batch otherwise (a loss at the end of
 * a burst shows no gap until the next message; a restarted engine's publisher may number on where
 * the old one stopped). A lost connection makes the mirror untrusted until such a replay. A slow
 * consumer loses messages at the socket's bound, which the next message's gap or the next
 * catch-up finds. Edge: the sockets and timers are passed in (src/runtime/kv_event_sockets.ts has
 * the real ones).
 */
export interface KvEventSubscription extends AsyncIterable<Uint8Array[]> {
  close(): void;
}

/** Told when the subscription has (re)connected and subscribed, and when it lost the publisher. */
export interface SubscriptionHooks {
  onConnect?: () => void;
  onDisconnect?: () => void;
}

export interface KvEventSockets {
  /** A SUB socket connected to `endpoint`, subscribed to `topic`. */
  subscribe(endpoint: string, topic: string, hooks?: SubscriptionHooks): KvEventSubscription;
  /** The publisher's buffered messages from seq `from` to its end marker; null on failure. */
  replay(endpoint: string, from: bigint, timeoutMs: number): Promise<Uint8Array[][] | null>;
}

export interface EngineEventFeedOptions {
  instanceId: string;
  endpoint: string;
  replayEndpoint?: string;
  topic?: string;
  index: EngineBlockIndex;
  sockets: KvEventSockets;
  timers: Timers;
  now: () => number;
  replayTimeoutMs?: number;
  resyncIntervalMs?: number;
  log: (message: string, fields?: Record<string, unknown>) => void;
}

export class EngineEventFeed {
  readonly #options: EngineEventFeedOptions;
  readonly #retry: PeriodicTask;
  #subscription: KvEventSubscription | undefined;
  #reading: Promise<void> | undefined;
  #replaying: Promise<void> | undefined;
  #stopped = false;
  /** Messages that were not KV event batches (dropped; the sequence gap they leave resyncs). */
  decodeErrors = 0;

  constructor(options: EngineEventFeedOptions) {
    this.#options = options;
    this.#retry = new PeriodicTask(
      () => this.#retryResync(),
      options.resyncIntervalMs ?? 30_000,
      options.timers,
      options.now,
    );
  }

  start(): void {
    const { sockets, endpoint, topic, index } = this.#options;
    this.#subscription = sockets.subscribe(endpoint, topic ?? "", {
      // Called before the connection's first message: the batches that follow are held.
      onConnect: () => void this.#retryResync(),
      onDisconnect: () => index.disconnected(),
    });
    this.#reading = this.#read(this.#subscription);
    this.#retry.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#subscription?.close();
    await Promise.all([this.#retry.stop(), this.#reading, this.#replaying]);
  }

  async #read(subscription: KvEventSubscription): Promise<void> {
    try {
      for await (const frames of subscription) {
        const batch = this.#decode(frames);
        if (batch === undefined) continue;
        const result = this.#options.index.receive(batch);
        if (result.resync) this.#replaying = this.#resync(result.from);
      }
    } catch (error) {
      if (!this.#stopped) {
        this.#options.log(`KV events of ${this.#options.instanceId}: the subscription failed`, {
          level: "warn",
          error: (error as Error).message,
        });
      }
    }
  }

  #decode(frames: Uint8Array[]): EngineKvEventBatch | undefined {
    return decodeCounting(
      frames,
      decodeKvEventMessage,
      this,
      (error) =>
        this.#options.log(`KV events of ${this.#options.instanceId}: a message is not a batch`, {
          level: "warn",
          error,
        }),
    );
  }

  /** Replays from `from`, and again from where the mirror asks (another publisher met). */
  async #resync(from: bigint): Promise<void> {
    const { replayEndpoint, sockets, index } = this.#options;
    for (let next: bigint | undefined = from; next !== undefined;) {
      const replies = replayEndpoint
        ? await sockets.replay(replayEndpoint, next, this.#options.replayTimeoutMs ?? 5_000)
        : null;
      if (this.#stopped) return;
      const batches = replies?.map((frames) => this.#decode(frames))
        .filter((b): b is EngineKvEventBatch => b !== undefined);
      const result = index.replayed(batches ?? null);
      next = result.resync ? result.from : undefined;
    }
  }

  /** A catch-up from the mirror's last batch, or the whole buffer when it is not whole. */
  async #retryResync(): Promise<void> {
    const { index, replayEndpoint } = this.#options;
    if (!replayEndpoint || this.#stopped) return;
    const from = index.beginResync();
    if (from === undefined) return;
    this.#replaying = this.#resync(from);
    await this.#replaying;
  }
}

/**
 * A message decoded, or undefined when it is not a batch: counted on `feed.decodeErrors`, and
 * `logFirst` told about the first (a publisher speaking another format would flood the log).
 */
export function decodeCounting<T>(
  frames: Uint8Array[],
  decode: (frames: Uint8Array[]) => T,
  feed: { decodeErrors: number },
  logFirst: (error: string) => void,
): T | undefined {
  try {
    return decode(frames);
  } catch (error) {
    if (feed.decodeErrors++ === 0) logFirst((error as Error).message);
    return undefined;
  }
}
