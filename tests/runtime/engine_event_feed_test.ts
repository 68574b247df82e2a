import { encode } from "@msgpack/msgpack";
import { assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { EngineBlockIndex } from "../../src/kv/events/engine_block_index.ts";
import {
  EngineEventFeed,
  type KvEventSockets,
  type KvEventSubscription,
  type SubscriptionHooks,
} from "../../src/runtime/engine_event_feed.ts";
import type { Timers } from "../../src/cluster/timers.ts";

/**
 * One vLLM message: topic, 8-byte seq, a batch made at `ts` storing `blocks` (low-64 ids as
 * integers).
 */
function message(seq: number, blocks: number[], ts: number): Uint8Array[] {
  const seqFrame = new Uint8Array(8);
  new DataView(seqFrame.buffer).setBigInt64(0, BigInt(seq));
  const payload = encode([ts, [{
    type: "BlockStored",
    block_hashes: blocks,
    parent_block_hash: null,
    token_ids: [],
    block_size: 16,
    lora_id: null,
    medium: "GPU",
    lora_name: null,
  }]]);
  return [new Uint8Array(0), seqFrame, payload];
}

const id = (n: number) => n.toString(16).padStart(16, "0");

/** A subscription the test pushes messages into; it tells `hooks` when it connects. */
function pushable(): KvEventSubscription & {
  push(frames: Uint8Array[]): void;
  hooks: SubscriptionHooks;
} {
  const queue: Uint8Array[][] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  return {
    hooks: {},
    push(frames) {
      queue.push(frames);
      wake?.();
    },
    close() {
      closed = true;
      wake?.();
    },
    async *[Symbol.asyncIterator]() {
      this.hooks.onConnect?.();
      while (!closed) {
        if (queue.length === 0) await new Promise<void>((resolve) => wake = resolve);
        while (queue.length > 0) yield queue.shift()!;
      }
    },
  };
}

/** Timers driven by hand: `fire()` runs what is due. */
function manualTimers(): Timers & { fire(): void } {
  const due: (() => void)[] = [];
  return {
    setTimeout: (callback) => due.push(callback),
    clearTimeout: () => {},
    fire: () => due.splice(0).forEach((callback) => callback()),
  };
}

/**
 * A feed on a fake publisher: `publish` sends a batch to the subscription and keeps it in the
 * replay buffer; `lose` only keeps it (the subscriber missed it). The buffer holds the batches
 * from `bufferStart` on. `restart` starts another publisher on the same endpoints: its numbers
 * from 0 again, its batches made at another time.
 */
function setup(options: { replay?: boolean } = {}) {
  const subscription = pushable();
  let published: Uint8Array[][] = [];
  let ts = 1;
  const replays: bigint[] = [];
  const buffer = { start: 0 };
  const sockets: KvEventSockets = {
    subscribe: (_endpoint, _topic, hooks) => {
      subscription.hooks = hooks ?? {};
      return subscription;
    },
    replay: (_endpoint, from) => {
      replays.push(from);
      return Promise.resolve(
        published.filter((_, seq) => seq >= Math.max(Number(from), buffer.start)),
      );
    },
  };
  const index = new EngineBlockIndex();
  const timers = manualTimers();
  const logs: string[] = [];
  const feed = new EngineEventFeed({
    instanceId: "v0",
    endpoint: "tcp://127.0.0.1:5557",
    replayEndpoint: options.replay ? "tcp://127.0.0.1:5558" : undefined,
    index,
    sockets,
    timers,
    now: () => 0,
    log: (message) => logs.push(message),
  });
  const lose = (blocks: number[]) => published.push(message(published.length, blocks, ts));
  const publish = (blocks: number[]) => {
    lose(blocks);
    subscription.push(published.at(-1)!);
  };
  const restart = () => {
    published = [];
    ts++;
  };
  return { subscription, publish, lose, restart, buffer, replays, index, timers, feed, logs };
}

Deno.test("event feed: at start it replays the buffer; a gap is replayed from the last batch applied", async () => {
  const { publish, lose, replays, index, feed } = setup({ replay: true });
  lose([1]); // published before the router started
  feed.start();
  await eventually(() => index.prefixBlocks([id(1)]) === 1, 2_000, "the start-up replay");
  publish([2]);
  await eventually(() => index.prefixBlocks([id(1), id(2)]) === 2, 2_000, "a live batch");
  lose([3]);
  lose([4]);
  publish([5]);
  await eventually(() => index.state === "exact" && replays.length === 2, 2_000, "the replay");
  assertEquals(replays, [0n, 1n]);
  assertEquals(index.prefixBlocks([1, 2, 3, 4, 5].map(id)), 5);
  assertEquals(index.counters.gaps, 1);
  await feed.stop();
});

Deno.test("event feed: without a replay endpoint a gap leaves the mirror untrusted", async () => {
  const { publish, lose, index, feed } = setup();
  feed.start();
  publish([1]);
  await eventually(() => index.state === "exact", 2_000, "seq 0");
  lose([2]);
  publish([3]);
  await eventually(() => index.counters.resyncFailed === 1, 2_000, "the failed resync");
  assertEquals(index.state, "untrusted");
  assertEquals(index.prefixBlocks([id(1)]), undefined);
  await feed.stop();
});

Deno.test("event feed: an untrusted mirror retries a full replay on its timer", async () => {
  const { publish, lose, buffer, replays, index, timers, feed } = setup({ replay: true });
  feed.start();
  publish([1]);
  await eventually(() => index.state === "exact", 2_000, "seq 0");
  lose([2]);
  lose([3]);
  buffer.start = 2; // the publisher's buffer has moved past batch 1
  publish([4]);
  await eventually(() => index.counters.resyncFailed === 1, 2_000, "the failed resync");
  assertEquals(index.state, "untrusted");
  buffer.start = 0; // e.g. the replay endpoint back with its whole buffer
  timers.fire();
  await eventually(() => index.state === "exact", 2_000, "the full replay");
  assertEquals(replays, [0n, 0n, 0n]);
  assertEquals(index.prefixBlocks([1, 2, 3, 4].map(id)), 4);
  await feed.stop();
});

Deno.test("event feed: a message that is not a batch is counted and logged once", async () => {
  const { subscription, publish, index, feed, logs } = setup();
  feed.start();
  subscription.push([new Uint8Array(1)]);
  subscription.push([new Uint8Array(1)]);
  publish([1]);
  await eventually(() => index.state === "exact", 2_000, "the good batch");
  assertEquals(feed.decodeErrors, 2);
  assertEquals(logs.filter((l) => l.includes("not a batch")).length, 1);
  await feed.stop();
});

Deno.test("event feed: a loss at the end of a burst is caught up on the timer", async () => {
  const { publish, lose, replays, index, timers, feed } = setup({ replay: true });
  feed.start();
  publish([1]);
  await eventually(() => index.state === "exact", 2_000, "seq 0");
  lose([2]); // the last message of a burst: no later one shows the gap
  assertEquals(index.prefixBlocks([id(1), id(2)]), 1);
  timers.fire();
  await eventually(() => index.prefixBlocks([id(1), id(2)]) === 2, 2_000, "the catch-up");
  assertEquals(replays, [0n, 0n]);
  assertEquals(index.counters.gaps, 0);
  await feed.stop();
});

Deno.test("event feed: an engine restarted while disconnected is found on reconnecting", async () => {
  const { subscription, publish, lose, restart, replays, index, feed } = setup({ replay: true });
  feed.start();
  for (const block of [1, 2, 3]) publish([block]);
  await eventually(() => index.prefixBlocks([1, 2, 3].map(id)) === 3, 2_000, "the old engine");
  subscription.hooks.onDisconnect?.();
  assertEquals(index.state, "untrusted", "nothing is known while disconnected");
  // The new engine publishes its first batch before the subscription is back.
  restart();
  lose([10]);
  subscription.hooks.onConnect?.();
  await eventually(() => index.state === "exact", 2_000, "the resync after the reconnect");
  assertEquals(index.prefixBlocks([id(10)]), 1);
  assertEquals(index.prefixBlocks([id(1)]), 0, "the old engine's blocks are gone");
  assertEquals(index.counters.restarts, 1);
  assertEquals(replays, [0n, 2n, 0n], "the catch-up from seq 2 found nothing there");
  // The new publisher's next batch continues the mirror.
  publish([11]);
  await eventually(() => index.prefixBlocks([id(10), id(11)]) === 2, 2_000, "a live batch");
  await feed.stop();
});

Deno.test("event feed: a restarted engine that numbered past the old one's last batch is found", async () => {
  const { subscription, publish, lose, restart, index, feed } = setup({ replay: true });
  feed.start();
  publish([1]);
  publish([2]);
  await eventually(() => index.prefixBlocks([id(1), id(2)]) === 2, 2_000, "the old engine");
  subscription.hooks.onDisconnect?.();
  restart();
  for (const block of [20, 21, 22]) lose([block]); // seq 0 to 2, while disconnected
  subscription.hooks.onConnect?.();
  publish([23]); // seq 3: live, it merely continues the old numbers
  await eventually(() => index.state === "exact", 2_000, "the resync after the reconnect");
  assertEquals(index.prefixBlocks([20, 21, 22, 23].map(id)), 4);
  assertEquals(index.prefixBlocks([id(1)]), 0);
  assertEquals(index.counters.restarts, 1);
  await feed.stop();
});

Deno.test("event feed: a reconnect to the same publisher catches up what was missed", async () => {
  const { subscription, publish, lose, replays, index, feed } = setup({ replay: true });
  feed.start();
  publish([1]);
  await eventually(() => index.state === "exact", 2_000, "seq 0");
  subscription.hooks.onDisconnect?.();
  lose([2]);
  subscription.hooks.onConnect?.();
  await eventually(() => index.state === "exact", 2_000, "the catch-up");
  assertEquals(index.prefixBlocks([id(1), id(2)]), 2);
  assertEquals(index.counters.restarts, 0);
  assertEquals(replays, [0n, 0n]);
  await feed.stop();
});
