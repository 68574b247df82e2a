import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { MergedIndex, mergeLocations, withLatestPredictions } from "../../src/kv/merged_index.ts";
import { PredictedIndex } from "../../src/kv/predicted_index.ts";
import { computePrefixHits } from "../../src/kv/prefix.ts";
import type { KeyLocation, KvIndex, LookupResult } from "../../src/kv/types.ts";

const at = (...memoryHosts: string[]): KeyLocation => ({
  present: memoryHosts.length > 0,
  memoryHosts,
  localDiskHosts: [],
  sharedDisk: false,
});

function fixedStore(result: Partial<LookupResult>): KvIndex & { calls: number } {
  const store = {
    calls: 0,
    lookup(keys: string[]) {
      store.calls++;
      return Promise.resolve({
        outcome: "ok" as const,
        locations: new Map<string, KeyLocation>(),
        keysQueried: keys.length,
        batches: 1,
        attempts: 1,
        elapsedMs: 3,
        ...result,
      });
    },
  };
  return store;
}

Deno.test("mergeLocations() takes per key the union of the store's hosts and the predicted ones", () => {
  const store = new Map([["k0", at("a")], ["k1", { ...at(), error: "OBJECT_NOT_FOUND" }]]);
  const predicted = new Map([["k0", { ...at("b"), predicted: true }], ["k1", {
    ...at("b"),
    predicted: true,
  }], ["k2", { ...at("b"), predicted: true }]]);
  const { locations, predictedKeys } = mergeLocations(store, predicted);
  deepStrictEqual(locations.get("k0"), {
    present: true,
    memoryHosts: ["a", "b"],
    localDiskHosts: [],
    sharedDisk: false,
    predicted: true,
  });
  deepStrictEqual(locations.get("k1")?.memoryHosts, ["b"]);
  strictEqual(locations.get("k1")?.present, true);
  strictEqual(locations.get("k1")?.error, undefined);
  strictEqual(locations.get("k2")?.predicted, true);
  strictEqual(predictedKeys, 2);
});

Deno.test("mergeLocations() leaves the store's answer unmarked when the prediction adds nothing", () => {
  const store = new Map([["k", { ...at("a"), localDiskHosts: ["a"], sharedDisk: true }]]);
  const { locations, predictedKeys } = mergeLocations(store, new Map([["k", at("a")]]));
  deepStrictEqual(locations.get("k"), {
    present: true,
    memoryHosts: ["a"],
    localDiskHosts: ["a"],
    sharedDisk: true,
  });
  strictEqual(predictedKeys, 0);
});

Deno.test("MergedIndex keeps answering from predictions while the store is down", async () => {
  const predicted = new PredictedIndex({ now: () => 0 });
  predicted.record(["k0", "k1"], { instanceId: "i1", kvHost: "10.0.0.1" });
  const store = fixedStore({ outcome: "store_down", batches: 0, attempts: 0, error: "down" });
  const result = await new MergedIndex(store, predicted).lookup(["k0", "k1", "k2"]);
  strictEqual(result.outcome, "store_down");
  strictEqual(result.error, "down");
  strictEqual(result.predictedKeys, 2);
  deepStrictEqual(result.locations.get("k1")?.memoryHosts, ["10.0.0.1"]);
  strictEqual(result.locations.has("k2"), false);
});

Deno.test("MergedIndex turns a store that throws into a failed outcome and still predicts", async () => {
  const predicted = new PredictedIndex({ now: () => 0 });
  predicted.record(["k"], { instanceId: "i1", kvHost: "h" });
  const broken: KvIndex = { lookup: () => Promise.reject(new Error("bug")) };
  const result = await new MergedIndex(broken, predicted).lookup(["k"]);
  strictEqual(result.outcome, "failed");
  ok(result.error?.includes("bug"));
  strictEqual(result.locations.get("k")?.present, true);
});

Deno.test("MergedIndex sends a burst sharing a new prefix after its first request", async () => {
  // Request 1 went to i2; the store has nothing yet (the engine is still prefilling).
  const predicted = new PredictedIndex({ now: () => 0 });
  const keys = ["c0", "c1", "c2"];
  predicted.record(keys, { instanceId: "i2", kvHost: "10.0.0.2" });
  const index = new MergedIndex(fixedStore({}), predicted);
  const result = await index.lookup(keys);
  const hits = computePrefixHits(keys.map((k) => [k]), result.locations, [
    { id: "i1", kvHost: "10.0.0.1" },
    { id: "i2", kvHost: "10.0.0.2" },
  ]);
  // Its writer holds it; the pool does not have it yet (nothing to transfer from).
  strictEqual(hits.poolChunks, 0);
  deepStrictEqual([...hits.localChunks], [["i1", 0], ["i2", 3]]);
  strictEqual(result.locations.get("c0")?.pendingWrite, true);
});

Deno.test("MergedIndex reads predictions after the store answered, so overlapping lookups see each other's dispatches", async () => {
  const predicted = new PredictedIndex({ now: () => 0 });
  let answer!: () => void;
  const slowStore: KvIndex = {
    lookup: (keys) =>
      new Promise((resolve) => {
        answer = () =>
          resolve({
            outcome: "ok",
            locations: new Map(),
            keysQueried: keys.length,
            batches: 1,
            attempts: 1,
            elapsedMs: 5,
          });
      }),
  };
  const pending = new MergedIndex(slowStore, predicted).lookup(["c0", "c1"]);
  // Another request is dispatched while this lookup waits for the store.
  predicted.record(["c0", "c1"], { instanceId: "i1", kvHost: "10.0.0.1" });
  answer();
  const result = await pending;
  deepStrictEqual(result.locations.get("c1")?.memoryHosts, ["10.0.0.1"]);
  strictEqual(result.predictedKeys, 2);
});

Deno.test("withLatestPredictions() adds dispatches recorded after the lookup answered, and nothing else", async () => {
  const predicted = new PredictedIndex({ now: () => 0 });
  const keys = ["c0", "c1", "c2"];
  const result = await new MergedIndex(
    fixedStore({ locations: new Map([["c0", at("h0")]]) }),
    predicted,
  )
    .lookup(keys);
  strictEqual(withLatestPredictions(result, keys, predicted), result, "nothing new: same result");
  predicted.record(["c0", "c1"], { instanceId: "i2", kvHost: "10.0.0.2" });
  const latest = withLatestPredictions(result, keys, predicted);
  deepStrictEqual(latest.locations.get("c0")?.memoryHosts, ["h0", "10.0.0.2"]);
  deepStrictEqual(latest.locations.get("c1")?.memoryHosts, ["10.0.0.2"]);
  strictEqual(latest.locations.get("c2"), undefined);
  strictEqual(latest.predictedKeys, 1, "c1 only: c0 was already present in the store");
  strictEqual(latest.outcome, result.outcome);
});
