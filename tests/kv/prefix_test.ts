import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { computePrefixHits, normalizeHost, withEngineHits } from "../../src/kv/prefix.ts";
import type { KeyLocation } from "../../src/kv/types.ts";

const on = (...memoryHosts: string[]): KeyLocation => ({
  present: true,
  memoryHosts,
  localDiskHosts: [],
  sharedDisk: false,
});
const missing: KeyLocation = {
  present: false,
  memoryHosts: [],
  localDiskHosts: [],
  sharedDisk: false,
};

const instances = [{ id: "a", kvHost: "10.0.0.1" }, { id: "b", kvHost: "10.0.0.2" }];

Deno.test("computePrefixHits() counts the pool prefix only from chunk 0", () => {
  const locations = new Map([["k0", missing], ["k1", on("10.0.0.1")], ["k2", on("10.0.0.1")]]);
  const hits = computePrefixHits([["k0"], ["k1"], ["k2"]], locations, instances);
  strictEqual(hits.poolChunks, 0);
  deepStrictEqual([...hits.localChunks], [["a", 0], ["b", 0]]);
});

Deno.test("computePrefixHits() stops at the first gap: hits after it do not count", () => {
  const locations = new Map([
    ["k0", on("10.0.0.1")],
    ["k1", on("10.0.0.2")],
    ["k3", on("10.0.0.1")],
  ]);
  const hits = computePrefixHits([["k0"], ["k1"], ["k2"], ["k3"]], locations, instances);
  strictEqual(hits.poolChunks, 2);
  deepStrictEqual(hits.localChunks.get("a"), 1);
  deepStrictEqual(hits.localChunks.get("b"), 0);
});

Deno.test("computePrefixHits() gives an instance its run from chunk 0, not a run starting later", () => {
  const locations = new Map([
    ["k0", on("10.0.0.1")],
    ["k1", on("10.0.0.2")],
    ["k2", on("10.0.0.2")],
  ]);
  const hits = computePrefixHits([["k0"], ["k1"], ["k2"]], locations, instances);
  strictEqual(hits.poolChunks, 3);
  strictEqual(hits.localChunks.get("b"), 0);
  strictEqual(hits.localChunks.get("a"), 1);
});

Deno.test("computePrefixHits() matches bracketed, upper-case IPv6 KV hosts", () => {
  const locations = new Map([["k0", on("fe80::1")], ["k1", on("fe80::1")]]);
  const hits = computePrefixHits([["k0"], ["k1"]], locations, [{ id: "v6", kvHost: "[FE80::1]" }]);
  strictEqual(hits.localChunks.get("v6"), 2);
});

Deno.test("computePrefixHits() needs every key of a multi-key chunk (all ranks, _k and _v)", () => {
  const chunks = [["c0_0_k", "c0_0_v", "c0_1_k", "c0_1_v"], [
    "c1_0_k",
    "c1_0_v",
    "c1_1_k",
    "c1_1_v",
  ]];
  const locations = new Map<string, KeyLocation>();
  for (const key of chunks[0]) locations.set(key, on("10.0.0.1"));
  for (const key of chunks[1]) locations.set(key, on("10.0.0.1"));
  locations.set("c1_1_v", on("10.0.0.2"));
  const hits = computePrefixHits(chunks, locations, instances);
  strictEqual(hits.poolChunks, 2);
  strictEqual(hits.localChunks.get("a"), 1, "one rank of chunk 1 lives elsewhere");
  locations.delete("c1_0_v");
  strictEqual(computePrefixHits(chunks, locations, instances).poolChunks, 1);
});

Deno.test("computePrefixHits() gives instances without a KV host no local prefix", () => {
  const locations = new Map([["k0", on("10.0.0.1")]]);
  const hits = computePrefixHits([["k0"]], locations, [{ id: "x" }]);
  strictEqual(hits.poolChunks, 1);
  strictEqual(hits.localChunks.get("x"), 0);
});

Deno.test("computePrefixHits() treats unanswered keys as absent", () => {
  const hits = computePrefixHits([["k0"]], new Map(), instances);
  strictEqual(hits.poolChunks, 0);
  strictEqual(hits.localChunks.get("a"), 0);
});

Deno.test("normalizeHost() strips brackets and case", () => {
  strictEqual(normalizeHost(" [FE80::1] "), "fe80::1");
  strictEqual(normalizeHost("Node-1"), "node-1");
});

Deno.test("computePrefixHits() counts a pending write for its writer's local prefix but not for the pool", () => {
  const pending = {
    present: true,
    memoryHosts: ["10.0.0.1"],
    localDiskHosts: [],
    sharedDisk: false,
    predicted: true,
    pendingWrite: true,
  };
  const stored = {
    present: true,
    memoryHosts: ["10.0.0.2"],
    localDiskHosts: [],
    sharedDisk: false,
  };
  const locations = new Map([["a", stored], ["b", pending], ["c", pending]]);
  const hits = computePrefixHits([["b"], ["c"]], locations, [{ id: "w", kvHost: "10.0.0.1" }]);
  deepStrictEqual(hits.poolChunks, 0);
  deepStrictEqual(hits.localChunks.get("w"), 2);
  const mixed = computePrefixHits([["a"], ["b"]], locations, [{ id: "w", kvHost: "10.0.0.1" }]);
  deepStrictEqual(mixed.poolChunks, 1);
  deepStrictEqual(mixed.localChunks.get("w"), 0);
});

Deno.test("engine hits raise an instance's local prefix, never lower it, and leave the pool's", () => {
  const stored = { poolChunks: 4, localChunks: new Map([["a", 3], ["b", 0], ["c", 2]]) };
  const merged = withEngineHits(stored, new Map([["a", 1], ["b", 5], ["d", 2]]));
  deepStrictEqual(merged, {
    poolChunks: 4,
    localChunks: new Map([["a", 3], ["b", 5], ["c", 2], ["d", 2]]),
  });
  strictEqual(withEngineHits(stored, new Map()), stored, "no mirror: the same answer");
});
