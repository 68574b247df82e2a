/**
 * The peers' policies (dynamo_kv, llmd_default, sglang_cache_aware): their contract with
 * non-default parameters too (tests/scheduling/policy_contract_test.ts covers the defaults), what
 * each one's rule picks, and their parameters' validation.
 */
import { assert, assertEquals, assertThrows } from "../assert.ts";
import { createPolicy, type PolicyParams } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleContext } from "../../src/scheduling/types.ts";
import { seededRandom } from "../../src/sim/rng.ts";

const PEERS: [string, PolicyParams][] = [
  ["dynamo_kv", {}],
  ["dynamo_kv", { routerTemperature: 0.5, overlapScoreWeight: 2 }],
  ["llmd_default", {}],
  ["llmd_default", { prefixCacheWeight: 1, queueWeight: 5, kvCapacityTokens: 100_000 }],
  ["sglang_cache_aware", {}],
  ["sglang_cache_aware", { balanceAbsThreshold: 0, balanceRelThreshold: 1, cacheThreshold: 0 }],
];

function candidate(id: string, fields: Partial<Candidate> = {}): Candidate {
  return {
    id,
    healthy: true,
    localPrefixTokens: 0,
    waitingPrefillTokens: 0,
    waitingPrefillRequests: 0,
    runningRequests: 0,
    ...fields,
  };
}

function cluster(seed: number, size: number) {
  const random = seededRandom(seed);
  const promptTokens = 1 + Math.floor(random() * 40_000);
  const candidates = Array.from({ length: size }, (_, i) =>
    candidate(`i${i}`, {
      healthy: random() > 0.3,
      localPrefixTokens: random() < 0.5 ? 0 : Math.floor(random() * promptTokens),
      waitingPrefillTokens: Math.floor(random() * 5) * 8192,
      waitingPrefillRequests: Math.floor(random() * 90),
      runningRequests: Math.floor(random() * 40),
    }));
  return { request: { promptTokens, poolPrefixTokens: promptTokens }, candidates };
}

const ctx = (seed: number): ScheduleContext => ({ random: seededRandom(seed), sequence: seed });

for (const [name, params] of PEERS) {
  const label = `${name} ${JSON.stringify(params)}`;

  Deno.test(`${label}: never ranks an unhealthy candidate, ranks every healthy one`, () => {
    for (let seed = 1; seed <= 300; seed++) {
      const { request, candidates } = cluster(seed, 1 + (seed % 24));
      const decision = createPolicy(name, params).select(request, candidates, ctx(seed));
      const healthy = candidates.filter((c) => c.healthy).map((c) => c.id);
      assertEquals([...decision.ranking].sort(), healthy.sort());
      const byId = new Map(decision.scores.map((s) => [s.id, s]));
      for (const c of candidates) assertEquals(byId.get(c.id)!.excluded !== undefined, !c.healthy);
      for (let i = 1; i < decision.ranking.length; i++) {
        assert(byId.get(decision.ranking[i - 1])!.score <= byId.get(decision.ranking[i])!.score);
      }
    }
  });

  Deno.test(`${label}: deterministic for a seeded random, and the seed is what varies`, () => {
    let differs = false;
    for (let seed = 1; seed <= 50; seed++) {
      const { request, candidates } = cluster(seed, 12);
      for (const c of candidates) c.localPrefixTokens = 0; // many ties: the draws decide
      for (const c of candidates) c.waitingPrefillTokens = c.waitingPrefillRequests = 0;
      const a = createPolicy(name, params).select(request, candidates, ctx(seed));
      const b = createPolicy(name, params).select(request, structuredClone(candidates), ctx(seed));
      assertEquals(a, b);
      const other = createPolicy(name, params).select(request, candidates, ctx(seed + 1000));
      if (other.ranking[0] !== a.ranking[0]) differs = true;
    }
    assert(differs, "ties are broken by the context's draws");
  });
}

Deno.test("dynamo_kv: the lowest overlap-weighted prefill blocks plus decode blocks wins", () => {
  const request = { promptTokens: 16_000, poolPrefixTokens: 16_000 };
  const candidates = [
    candidate("cached", { localPrefixTokens: 12_000, waitingPrefillTokens: 6000 }),
    candidate("idle"),
    candidate("decoding", { runningRequests: 3 }),
  ];
  const decision = createPolicy("dynamo_kv").select(request, candidates, ctx(1));
  // cached: 2·(6000 + 4000)/16 = 1250; idle: 2·16000/16 = 2000; decoding: 1000 + (16000 + 3·8192)/16.
  assertEquals(decision.ranking, ["cached", "idle", "decoding"]);
  const terms = decision.scores.find((s) => s.id === "cached")!.terms;
  assertEquals(terms, { weightedPrefillBlocks: 625, decodeBlocks: 625 });
  // Weight 0 ignores the prefix: pure load balancing on the blocks.
  const blind = createPolicy("dynamo_kv", { overlapScoreWeight: 0 }).select(
    request,
    [candidate("a", { localPrefixTokens: 15_000, runningRequests: 2 }), candidate("b")],
    ctx(1),
  );
  assertEquals(blind.ranking[0], "b");
});

Deno.test("dynamo_kv: with a temperature the choice is a softmax sample, mostly the cheapest", () => {
  const policy = createPolicy("dynamo_kv", { routerTemperature: 0.2 });
  const request = { promptTokens: 8000, poolPrefixTokens: 0 };
  const candidates = [
    candidate("light"),
    candidate("mid", { waitingPrefillTokens: 4000 }),
    candidate("heavy", { waitingPrefillTokens: 16_000 }),
  ];
  const random = seededRandom(5);
  const counts: Record<string, number> = { light: 0, mid: 0, heavy: 0 };
  for (let i = 0; i < 3000; i++) {
    counts[policy.select(request, candidates, { random, sequence: i }).ranking[0]]++;
  }
  assert(counts.light > counts.mid && counts.mid > counts.heavy, JSON.stringify(counts));
  assert(counts.heavy > 0, "every worker has a chance");
});

Deno.test("llmd_default: prefix ×3, queue ×2, free KV ×2, highest total wins", () => {
  const request = { promptTokens: 10_000, poolPrefixTokens: 10_000 };
  const decision = createPolicy("llmd_default").select(request, [
    candidate("hit", { localPrefixTokens: 9000, waitingPrefillRequests: 4 }),
    candidate("empty", { waitingPrefillRequests: 0 }),
  ], ctx(1));
  // hit: 3·0.9 + 2·0 + 2·(1 − 0) = 4.7; empty: 0 + 2·1 + 2 = 4.
  assertEquals(decision.ranking, ["hit", "empty"]);
  const hit = decision.scores.find((s) => s.id === "hit")!;
  assert(Math.abs(hit.score + 4.7) < 1e-9, `${hit.score}`);
  // Equal queues score a neutral 1 for everyone.
  const equal = createPolicy("llmd_default").select(request, [
    candidate("a", { waitingPrefillRequests: 2 }),
    candidate("b", { waitingPrefillRequests: 2 }),
  ], ctx(1));
  for (const s of equal.scores) assertEquals(s.terms.queueScore, -2);
});

Deno.test("sglang_cache_aware: shortest queue when imbalanced, best match above the threshold, else the smallest tree", () => {
  const policy = createPolicy("sglang_cache_aware");
  const request = { promptTokens: 10_000, poolPrefixTokens: 10_000 };
  // Balanced load, a 60% match: cache routing.
  const match = policy.select(request, [
    candidate("a", { localPrefixTokens: 6000, waitingPrefillRequests: 5 }),
    candidate("b", { waitingPrefillRequests: 1 }),
  ], ctx(1));
  assertEquals(match.ranking[0], "a");
  // Imbalanced (100 vs 10 requests: > 64 apart and > 1.5×): shortest queue despite the match.
  const imbalanced = policy.select(request, [
    candidate("a", { localPrefixTokens: 6000, waitingPrefillRequests: 100 }),
    candidate("b", { waitingPrefillRequests: 10 }),
  ], ctx(1));
  assertEquals(imbalanced.ranking[0], "b");
  assertEquals(imbalanced.scores[0].detail!.imbalanced, 1);
  // A 20% match is below the 0.3 threshold: the smallest tree (fewest waiting tokens) wins.
  const miss = policy.select(request, [
    candidate("a", { localPrefixTokens: 2000, waitingPrefillTokens: 9000 }),
    candidate("b", { waitingPrefillTokens: 100 }),
  ], ctx(1));
  assertEquals(miss.ranking[0], "b");
});

Deno.test("the peers' parameters are validated, every problem listed", () => {
  const error = assertThrows(() =>
    createPolicy("sglang_cache_aware", {
      cacheThreshold: 1.5,
      balanceAbsThreshold: -1,
      routerTemperature: -0.1,
      kvCapacityTokens: 0,
    })
  );
  for (
    const part of ["cacheThreshold", "balanceAbsThreshold", "routerTemperature", "kvCapacityTokens"]
  ) {
    assert(error.message.includes(part), `${part} missing from: ${error.message}`);
  }
  createPolicy("dynamo_kv", { overlapScoreWeight: 0, routerTemperature: 0 });
});
