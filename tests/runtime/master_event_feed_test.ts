import { assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { PoolMirror } from "../../src/kv/events/pool_mirror.ts";
import { MasterEventFeed } from "../../src/runtime/master_event_feed.ts";
import type {
  KvEventSubscription,
  SubscriptionHooks,
} from "../../src/runtime/engine_event_feed.ts";
import type { Timers } from "../../src/cluster/timers.ts";

/** A subscription that yields nothing, connected at once; the test calls its hooks. */
function silent(): KvEventSubscription & { hooks: SubscriptionHooks } {
  let wake: (() => void) | undefined;
  return {
    hooks: {},
    close: () => wake?.(),
    [Symbol.asyncIterator]() {
      this.hooks.onConnect?.();
      const closed = new Promise<IteratorResult<Uint8Array[]>>((resolve) =>
        wake = () => resolve({ done: true, value: undefined })
      );
      return { next: () => closed };
    },
  };
}

/** Timers that never fire on their own: the feed's retry timer stays out of the way. */
const stillTimers: Timers = { setTimeout: () => 0, clearTimeout: () => {} };

/** Snapshots the test answers one by one: `answer(keys)` resolves the oldest asked. */
function heldSnapshots() {
  const asked: ((keys: string[]) => void)[] = [];
  return {
    asked,
    read: () => new Promise<string[] | null>((resolve) => asked.push(resolve)),
    answer: (keys: string[]) => asked.shift()!(keys),
  };
}

Deno.test("master event feed: a reconnect while a snapshot is read reads the keys again after it", async () => {
  const subscription = silent();
  const mirror = new PoolMirror();
  const snapshots = heldSnapshots();
  const feed = new MasterEventFeed({
    endpoint: "tcp://127.0.0.1:5560",
    mirror,
    sockets: {
      subscribe: (_endpoint, _topic, hooks) => {
        subscription.hooks = hooks ?? {};
        return subscription;
      },
      replay: () => Promise.resolve(null),
    },
    snapshot: snapshots.read,
    timers: stillTimers,
    now: () => 0,
    log: () => {},
  });
  feed.start();
  await eventually(() => snapshots.asked.length === 1, 2_000, "the first snapshot asked");
  // The publisher goes away and comes back while that snapshot is on its way.
  subscription.hooks.onDisconnect?.();
  subscription.hooks.onConnect?.();
  snapshots.answer(["a"]); // read before the disconnect: stale
  await eventually(() => snapshots.asked.length === 1, 2_000, "a second snapshot asked");
  assertEquals(mirror.state, "untrusted");
  snapshots.answer(["a", "b"]);
  await eventually(() => mirror.state === "exact", 2_000, "the second snapshot");
  assertEquals([mirror.has("a"), mirror.has("b"), mirror.has("c")], [true, true, false]);
  assertEquals(mirror.counters.snapshots, 1, "the stale one was not applied");
  await feed.stop();
});
