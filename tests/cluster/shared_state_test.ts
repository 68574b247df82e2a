import { assert, assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { LoadAccount } from "../../src/cluster/load_account.ts";
import { RemoteFacts } from "../../src/cluster/remote_facts.ts";
import { decodeBatch, encodeBatch } from "../../src/cluster/shared_facts.ts";
import { SharedState } from "../../src/cluster/shared_state.ts";
import { PredictedIndex } from "../../src/kv/predicted_index.ts";
import { memoryBus } from "./memory_bus.ts";

function replica(name: string, channel: ReturnType<typeof memoryBus>, clock = { t: 0 }) {
  const now = () => clock.t;
  const account = new LoadAccount({ now, expireAfterMs: 60_000 });
  const predicted = new PredictedIndex({ now, ttlMs: 5_000 });
  const logs: string[] = [];
  const shared = new SharedState({
    pubsub: channel.pubsub(),
    replica: name,
    remote: new RemoteFacts({ viewOf: () => ({ account, predicted }), now, silentAfterMs: 1_000 }),
    log: (message) => logs.push(message),
    timeoutMs: 100,
    heartbeatMs: 60_000,
  });
  shared.attach("m", account, predicted);
  return { account, predicted, shared, logs };
}

Deno.test("facts survive encoding; a malformed or foreign message is refused", () => {
  const batch = {
    v: 1 as const,
    replica: "a",
    facts: [
      { k: "lease" as const, model: "m", instance: "gpu-0", id: "1", tokens: 8_000 },
      { k: "keys" as const, model: "m", instance: "gpu-0", kvHost: "10.0.0.1", keys: ["k0"] },
    ],
  };
  assertEquals(decodeBatch(encodeBatch(batch)), batch);
  assertEquals(decodeBatch("{"), "not JSON");
  assertEquals(decodeBatch(JSON.stringify({ ...batch, v: 2 })), "unknown version");
  const bad = decodeBatch(JSON.stringify({ ...batch, facts: [{ k: "lease", model: "m" }] }));
  assert(typeof bad === "string" && bad.startsWith("malformed fact"), String(bad));
  const home = { k: "home" as const, model: "m", id: "resp_1", instance: "gpu-0" };
  assertEquals(decodeBatch(encodeBatch({ ...batch, facts: [home] })), { ...batch, facts: [home] });
  const longId = { ...home, id: "x".repeat(300) };
  assert(
    String(decodeBatch(JSON.stringify({ ...batch, facts: [longId] }))).startsWith("malformed"),
  );
  const withSeqs = { ...batch, facts: [{ ...batch.facts[0], seqs: 4 }] };
  assertEquals(decodeBatch(encodeBatch(withSeqs)), withSeqs);
  const zero = decodeBatch(JSON.stringify({ ...batch, facts: [{ ...batch.facts[0], seqs: 0 }] }));
  assert(typeof zero === "string" && zero.startsWith("malformed fact"), String(zero));
});

Deno.test("a snapshot part and a catch-up ask survive encoding; a malformed live range is refused", () => {
  const lease = { model: "m", instance: "gpu-0", id: "7", tokens: 300, decoding: true };
  const part = {
    v: 1 as const,
    replica: "a",
    facts: [],
    live: { from: 0, to: 9, leases: [lease] },
    catchUp: true,
  };
  assertEquals(decodeBatch(encodeBatch(part)), part);
  const broken = { ...part, live: { from: 0, to: 9, leases: [{ ...lease, decoding: "yes" }] } };
  assertEquals(decodeBatch(JSON.stringify(broken)), "malformed live range");
  assertEquals(decodeBatch(JSON.stringify({ ...part, catchUp: 1 })), "malformed catchUp");
});

Deno.test("a lease and a prediction on one replica appear in the other's view and leave with it", async () => {
  const channel = memoryBus();
  const [a, b] = [replica("a", channel), replica("b", channel)];
  a.shared.start();
  b.shared.start();
  try {
    const lease = a.account.lease("gpu-0", 8_000);
    a.predicted.record(["k0", "k1"], { instanceId: "gpu-0", kvHost: "10.0.0.1" });
    await eventually(() => b.account.load("gpu-0").prefillTokens === 8_000, 2_000, "lease shared");
    assertEquals(b.predicted.peek("k1")?.memoryHosts, ["10.0.0.1"]);
    lease.firstToken();
    await eventually(() => b.account.load("gpu-0").decodeRequests === 1, 2_000, "first token");
    lease.release();
    await eventually(() => b.account.load("gpu-0").decodeRequests === 0, 2_000, "release");
    assertEquals(a.account.load("gpu-0").decodeRequests, 0, "b's copy is not echoed back to a");
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("a lease of several sequences counts as many decodes on the other replica, live or listed", async () => {
  const channel = memoryBus();
  const [a, b] = [replica("a", channel), replica("b", channel)];
  a.shared.start();
  b.shared.start();
  try {
    const lease = a.account.lease("gpu-0", 100, { sequences: 4 });
    lease.firstToken();
    await eventually(() => b.account.load("gpu-0").decodeRequests === 4, 2_000, "four decodes");
    // A replica that joins later asks to be caught up and learns it from a's snapshot.
    const c = replica("c", channel);
    c.shared.start();
    try {
      await eventually(() => c.account.load("gpu-0").decodeRequests === 4, 2_000, "listed");
    } finally {
      await c.shared.close();
    }
    lease.release();
    await eventually(() => b.account.load("gpu-0").decodeRequests === 0, 2_000, "release");
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("a failing channel is counted and logged once; back online, the others catch up", async () => {
  const channel = memoryBus();
  const [a, b] = [replica("a", channel), replica("b", channel)];
  a.shared.start();
  b.shared.start();
  try {
    a.account.lease("gpu-1", 500);
    await eventually(() => b.account.load("gpu-1").prefillRequests === 1, 2_000, "shared");
    channel.state.down = true;
    a.account.lease("gpu-1", 700); // not delivered: a keeps serving on its own view
    a.account.lease("gpu-1", 900);
    await eventually(() => a.shared.counts.errors >= 1, 2_000, "failures counted");
    a.account.lease("gpu-1", 0).release(); // a later turn: fails too, logged no more
    assertEquals(a.logs.filter((l) => l.startsWith("shared state unavailable")).length, 1);
    await eventually(() => a.shared.counts.errors >= 2, 2_000, "second failure");
    channel.state.down = false;
    channel.reconnect(); // each publishes its snapshot of live leases
    await eventually(() => b.account.load("gpu-1").prefillRequests === 3, 2_000, "caught up");
    assertEquals(b.account.load("gpu-1").prefillTokens, 2_100);
  } finally {
    await Promise.all([a.shared.close(), b.shared.close()]);
  }
});

Deno.test("the leases of a replica gone silent are released; its facts for unknown models are ignored", () => {
  const clock = { t: 0 };
  const account = new LoadAccount({ now: () => clock.t });
  const remote = new RemoteFacts({
    viewOf: (model) => (model === "m" ? { account } : undefined),
    now: () => clock.t,
    silentAfterMs: 1_000,
  });
  remote.apply({
    v: 1,
    replica: "gone",
    facts: [
      { k: "lease", model: "m", instance: "gpu-0", id: "1", tokens: 300 },
      { k: "lease", model: "other", instance: "gpu-0", id: "2", tokens: 300 },
    ],
  });
  assertEquals(account.load("gpu-0").prefillTokens, 300);
  assertEquals(remote.remoteLeases, 1);
  clock.t = 999;
  assertEquals(remote.sweep(), 0);
  clock.t = 1_001;
  assertEquals(remote.sweep(), 1);
  assertEquals(account.load("gpu-0").prefillRequests, 0);
});
