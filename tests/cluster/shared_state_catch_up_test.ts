/**
 * Catching up after an outage, with hand-driven time: each replica's periodic snapshot of its
 * live leases repairs ends and leases the others never heard, a reconnected replica's catch-up
 * ask converges the views without waiting a period, and a replica that stops beating is dropped.
 */
import { assert, assertEquals } from "../assert.ts";
import { LoadAccount } from "../../src/cluster/load_account.ts";
import { RemoteFacts } from "../../src/cluster/remote_facts.ts";
import { decodeBatch } from "../../src/cluster/shared_facts.ts";
import { SharedState } from "../../src/cluster/shared_state.ts";
import { ManualTime } from "./manual_time.ts";
import { memoryBus } from "./memory_bus.ts";

const HEARTBEAT_MS = 1_000;
const SILENT_AFTER_MS = 3_000;

function replica(name: string, channel: ReturnType<typeof memoryBus>, time: ManualTime) {
  const account = new LoadAccount({ now: time.now, expireAfterMs: 600_000 });
  const logs: string[] = [];
  const pubsub = channel.pubsub();
  const remote = new RemoteFacts({
    viewOf: () => ({ account }),
    now: time.now,
    silentAfterMs: SILENT_AFTER_MS,
    log: (message) => logs.push(message),
  });
  const shared = new SharedState({
    pubsub,
    replica: name,
    remote,
    log: (message) => logs.push(message),
    timeoutMs: 100,
    heartbeatMs: HEARTBEAT_MS,
    timers: time,
    now: time.now,
  });
  shared.attach("m", account);
  shared.start();
  /** In flight on gpu-0 in this replica's view. */
  const inflight = () => {
    const load = account.load("gpu-0");
    return load.prefillRequests + load.decodeRequests;
  };
  return { account, shared, pubsub, logs, inflight };
}

/** Two replicas on one channel that have heard each other. */
async function pair() {
  const time = new ManualTime(1_000);
  const channel = memoryBus();
  const a = replica("a", channel, time);
  const b = replica("b", channel, time);
  await time.advance(0);
  return { time, channel, a, b };
}

Deno.test("the next heartbeat releases a lease whose end was lost while the channel was down", async () => {
  const { time, channel, a, b } = await pair();
  try {
    const lease = a.account.lease("gpu-0", 800);
    lease.firstToken();
    await time.advance(0);
    assertEquals(b.account.load("gpu-0").decodeRequests, 1);
    channel.state.down = true;
    lease.release(); // its end is lost
    await time.advance(0);
    channel.state.down = false; // no reconnect event: only the period repairs it
    assertEquals(b.inflight(), 1, "b still counts it");
    await time.advance(HEARTBEAT_MS);
    assertEquals(b.inflight(), 0);
    assertEquals(b.shared.samples().lostEnds, 1);
    assert(b.logs.some((l) => l.includes("caught up with a replica's snapshot")), b.logs.join());
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("a lease and its first token lost while the channel was down are taken from the next heartbeat", async () => {
  const { time, channel, a, b } = await pair();
  try {
    channel.state.down = true;
    a.account.lease("gpu-0", 500).firstToken();
    a.account.lease("gpu-0", 700);
    await time.advance(0);
    channel.state.down = false;
    await time.advance(HEARTBEAT_MS);
    assertEquals(b.account.load("gpu-0"), {
      prefillTokens: 700,
      prefillRequests: 1,
      decodeRequests: 1,
    });
    assertEquals(b.shared.samples().lostLeases, 2);
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("back online, one replica's catch-up ask converges both views before the next period", async () => {
  const { time, channel, a, b } = await pair();
  try {
    const [fromA, fromB] = [a.account.lease("gpu-0", 100), b.account.lease("gpu-0", 200)];
    const keptByB = b.account.lease("gpu-0", 300);
    await time.advance(0);
    assertEquals([a.inflight(), b.inflight()], [3, 3]);
    channel.state.down = true;
    fromA.release();
    fromB.release();
    await time.advance(0);
    assertEquals([a.inflight(), b.inflight()], [2, 2], "each still counts the other's ended one");
    channel.state.down = false;
    a.pubsub.reconnect(); // a's snapshot and ask; b answers with its own
    await time.advance(0);
    assertEquals([a.inflight(), b.inflight()], [1, 1]);
    assertEquals(a.account.load("gpu-0").prefillTokens, 300);
    keptByB.release();
    await time.advance(0);
    assertEquals([a.inflight(), b.inflight()], [0, 0]);
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("facts still queued when a snapshot goes out are sent first: no false repair", async () => {
  const { time, a, b } = await pair();
  try {
    const ending = a.account.lease("gpu-0", 100);
    await time.advance(0);
    ending.release();
    a.account.lease("gpu-0", 200);
    a.pubsub.reconnect(); // a snapshot in the same turn, before the queue's own flush
    await time.advance(0);
    assertEquals(b.account.load("gpu-0").prefillTokens, 200);
    const { lostEnds, lostLeases } = b.shared.samples();
    assertEquals({ lostEnds, lostLeases }, { lostEnds: 0, lostLeases: 0 });
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("a replica whose heartbeats stop has its leases released after silentAfterMs; live ones stay", async () => {
  const time = new ManualTime(1_000);
  const channel = memoryBus();
  const [a, b, c] = ["a", "b", "c"].map((name) => replica(name, channel, time));
  try {
    a.account.lease("gpu-0", 100);
    c.account.lease("gpu-0", 100);
    await time.advance(0);
    assertEquals(b.inflight(), 2);
    await a.shared.close(); // a dies: no more heartbeats
    await time.advance(SILENT_AFTER_MS - HEARTBEAT_MS);
    assertEquals(b.inflight(), 2, "not yet silent for long enough");
    await time.advance(2 * HEARTBEAT_MS);
    assertEquals(b.inflight(), 1, "c, still beating, keeps its lease");
    assertEquals(b.shared.samples().silentReplicas, 1);
    assert(b.logs.some((l) => l.includes("replica went silent")), b.logs.join());
  } finally {
    await Promise.all([b.shared.close(), c.shared.close()]);
  }
});

Deno.test("snapshot messages stay bounded: 150 leases taken during an outage arrive in parts of at most 64", async () => {
  const { time, channel, a, b } = await pair();
  try {
    channel.state.down = true;
    for (let i = 0; i < 150; i++) a.account.lease("gpu-0", 10);
    await time.advance(0);
    channel.state.down = false;
    channel.state.sent.length = 0;
    await time.advance(HEARTBEAT_MS);
    assertEquals(b.inflight(), 150);
    const parts = channel.state.sent.map(decodeBatch)
      .filter((batch) => typeof batch !== "string" && batch.replica === "a" && batch.live)
      .map((batch) => typeof batch === "string" ? 0 : batch.live!.leases.length);
    assertEquals(parts, [64, 64, 22]);
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("a decision never waits on the channel: a publish that hangs only counts an error after timeoutMs", async () => {
  const time = new ManualTime(1_000);
  const channel = memoryBus();
  const a = replica("a", channel, time);
  const hanging = a.pubsub.publish;
  try {
    await time.advance(0);
    a.pubsub.publish = () => new Promise(() => {}); // Redis accepts the connection, never answers
    const lease = a.account.lease("gpu-0", 100); // returns at once
    assertEquals(a.inflight(), 1);
    await time.advance(0);
    assertEquals(a.shared.samples().errors, 0);
    await time.advance(100);
    assertEquals(a.shared.samples().errors, 1);
    lease.release();
  } finally {
    a.pubsub.publish = hanging;
    await a.shared.close();
  }
});
