import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { PredictedIndex } from "../../src/kv/predicted_index.ts";

function clock(start = 0) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

Deno.test("PredictedIndex answers like the store for keys just dispatched, with the writer's KV host", async () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now });
  index.record(["k0", "k1"], { instanceId: "a", kvHost: "[FE80::1]" });
  const result = await index.lookup(["k0", "k1", "k2"]);
  strictEqual(result.outcome, "ok");
  strictEqual(result.keysQueried, 3);
  deepStrictEqual(result.locations.get("k0"), {
    present: true,
    memoryHosts: ["fe80::1"],
    localDiskHosts: [],
    sharedDisk: false,
    predicted: true,
  });
  strictEqual(result.locations.has("k2"), false);
});

Deno.test("PredictedIndex forgets a prediction once its TTL has passed", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 5_000 });
  index.record(["k"], { instanceId: "a", kvHost: "h1" });
  time.advance(4_999);
  strictEqual(index.peek("k")?.present, true);
  time.advance(1);
  strictEqual(index.peek("k"), undefined);
  strictEqual(index.size, 0);
});

Deno.test("PredictedIndex restarts the TTL when the same instance writes the key again", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 1_000 });
  index.record(["k"], { instanceId: "a", kvHost: "h1" });
  time.advance(900);
  index.record(["k"], { instanceId: "a", kvHost: "h1" });
  time.advance(900);
  deepStrictEqual(index.peek("k")?.memoryHosts, ["h1"]);
});

Deno.test("PredictedIndex lists every instance writing a key until each one expires", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 1_000 });
  index.record(["k"], { instanceId: "a", kvHost: "h1" });
  time.advance(500);
  index.record(["k"], { instanceId: "b", kvHost: "h2" });
  deepStrictEqual(index.peek("k")?.memoryHosts, ["h1", "h2"]);
  time.advance(500);
  deepStrictEqual(index.peek("k")?.memoryHosts, ["h2"]);
});

Deno.test("PredictedIndex drops the least recently used key beyond maxEntries", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, maxEntries: 3 });
  const writer = { instanceId: "a", kvHost: "h" };
  index.record(["k1", "k2", "k3"], writer);
  index.peek("k1"); // k1 is now the most recently used; k2 the least.
  index.record(["k4"], writer);
  strictEqual(index.size, 3);
  strictEqual(index.peek("k2"), undefined);
  strictEqual(index.peek("k1")?.present, true);
  strictEqual(index.peek("k4")?.present, true);
  strictEqual(index.evictedTotal, 1);
});

Deno.test("PredictedIndex sweeps expired keys before evicting live ones", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, maxEntries: 2, ttlMs: 100 });
  index.record(["old"], { instanceId: "a" });
  time.advance(100);
  index.record(["n1", "n2"], { instanceId: "a" });
  strictEqual(index.size, 2);
  strictEqual(index.evictedTotal, 0);
  strictEqual(index.peek("n1")?.present, true);
});

Deno.test("PredictedIndex vouches for the pool but no host when the writer has no KV host", () => {
  const index = new PredictedIndex({ now: () => 0 });
  index.record(["k"], { instanceId: "a" });
  deepStrictEqual(index.peek("k")?.memoryHosts, []);
  strictEqual(index.peek("k")?.present, true);
});

Deno.test("PredictedIndex.lookup() of no keys is skipped", async () => {
  const index = new PredictedIndex({ now: () => 0 });
  strictEqual((await index.lookup([])).outcome, "skipped");
});

Deno.test("forget() drops one writer of the given keys and keeps the others", () => {
  let now = 0;
  const index = new PredictedIndex({ now: () => now, ttlMs: 1_000 });
  const at = index.record(["k1", "k2"], { instanceId: "a", kvHost: "10.0.0.1" });
  index.record(["k1"], { instanceId: "b", kvHost: "10.0.0.2" });
  index.forget(["k1", "k2"], "a", at);
  deepStrictEqual(index.peek("k1")?.memoryHosts, ["10.0.0.2"]);
  deepStrictEqual(index.peek("k2"), undefined);
  now = 2_000;
  deepStrictEqual(index.peek("k1"), undefined);
});

Deno.test("forget() takes back one dispatch: another sent to the same instance still vouches for its keys", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 1_000 });
  const writer = { instanceId: "a", kvHost: "10.0.0.1" };
  const first = index.record(["doc", "first-question"], writer); // a request that went to "a"
  time.advance(10);
  const second = index.record(["doc", "second-question"], writer); // one whose attempt failed
  index.forget(["doc", "second-question"], "a", second);
  deepStrictEqual(index.peek("doc")?.memoryHosts, ["10.0.0.1"]);
  strictEqual(index.peek("second-question"), undefined);
  index.forget(["doc", "first-question"], "a", first);
  strictEqual(index.peek("doc"), undefined, "no dispatch vouches for it any more");
});

Deno.test("a dispatch recorded after its key's prediction expired counts alone", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 1_000 });
  index.record(["doc"], { instanceId: "a" });
  time.advance(2_000);
  const fresh = index.record(["doc"], { instanceId: "a" });
  index.forget(["doc"], "a", fresh);
  strictEqual(index.peek("doc"), undefined);
});

Deno.test("a dispatch whose prediction expired before it failed takes back nothing a later one made", () => {
  const time = clock();
  const index = new PredictedIndex({ now: time.now, ttlMs: 5_000 });
  const slow = index.record(["doc"], { instanceId: "a" }); // its attempt fails 8 s later
  time.advance(6_000);
  index.record(["doc"], { instanceId: "a" }); // prefilling the document now
  time.advance(2_000);
  index.forget(["doc"], "a", slow);
  deepStrictEqual(index.peek("doc")?.memoryHosts, []);
  // Also when the expired prediction was swept (read, or evicted) before the new one came.
  const early = index.record(["other"], { instanceId: "a" });
  time.advance(6_000);
  strictEqual(index.peek("other"), undefined);
  index.record(["other"], { instanceId: "a" });
  index.forget(["other"], "a", early);
  deepStrictEqual(index.peek("other")?.memoryHosts, []);
});
