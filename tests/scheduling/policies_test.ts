import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../../src/scheduling/prefill_model.ts";
import { createPolicy } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleContext } from "../../src/scheduling/types.ts";
import { seededRandom } from "../../src/sim/rng.ts";

function candidate(id: string, fields: Partial<Candidate> = {}): Candidate {
  return {
    id,
    healthy: true,
    localPrefixTokens: 0,
    waitingPrefillTokens: 0,
    runningRequests: 0,
    ...fields,
  };
}

const ctx = (seed = 1, sequence = 0): ScheduleContext => ({ random: seededRandom(seed), sequence });
const request = (promptTokens: number, poolPrefixTokens = 0) => ({
  promptTokens,
  poolPrefixTokens,
});

Deno.test("roundRobin() starts at the sequence number and skips unhealthy candidates", () => {
  const policy = createPolicy("round_robin");
  const candidates = [
    candidate("a"),
    candidate("b", { healthy: false }),
    candidate("c"),
    candidate("d"),
  ];
  const firsts = [0, 1, 2, 3].map((sequence) =>
    policy.select(request(100), candidates, ctx(1, sequence)).ranking[0]
  );
  assertEquals(firsts, ["a", "c", "d", "a"]);
  assertEquals(policy.select(request(100), candidates, ctx(1, 1)).ranking, ["c", "d", "a"]);
});

Deno.test("random() spreads choices evenly over the healthy candidates", () => {
  const policy = createPolicy("random");
  const candidates = ["a", "b", "c", "d"].map((id) => candidate(id));
  const random = seededRandom(42);
  const counts = new Map<string, number>();
  for (let i = 0; i < 4000; i++) {
    const first = policy.select(request(100), candidates, { random, sequence: i }).ranking[0];
    counts.set(first, (counts.get(first) ?? 0) + 1);
  }
  for (const id of ["a", "b", "c", "d"]) {
    assert(Math.abs(counts.get(id)! - 1000) < 120, `${id}: ${counts.get(id)}`);
  }
});

Deno.test("leastLoad() picks the fewest waiting prefill tokens and ignores the cache", () => {
  const candidates = [
    candidate("hot", { localPrefixTokens: 9000, waitingPrefillTokens: 5000 }),
    candidate("idle", { waitingPrefillTokens: 100 }),
  ];
  assertEquals(createPolicy("least_load").select(request(10_000), candidates, ctx()).ranking, [
    "idle",
    "hot",
  ]);
});

Deno.test("leastLoad() breaks ties at random, so tied instances share the work", () => {
  const policy = createPolicy("least_load");
  const candidates = [candidate("a"), candidate("b"), candidate("c", { waitingPrefillTokens: 1 })];
  const random = seededRandom(3);
  const winners = new Set<string>();
  for (let i = 0; i < 50; i++) {
    winners.add(policy.select(request(10), candidates, { random, sequence: i }).ranking[0]);
  }
  assertEquals([...winners].sort(), ["a", "b"]);
});

Deno.test("cacheAware() prefers the instance holding the longest prefix when loads tie", () => {
  const candidates = [
    candidate("none"),
    candidate("short", { localPrefixTokens: 2048 }),
    candidate("long", { localPrefixTokens: 6144 }),
  ];
  const decision = createPolicy("cache_aware").select(request(8192), candidates, ctx());
  assertEquals(decision.ranking, ["long", "short", "none"]);
  assertEquals(decision.scores[0].terms, { prefixMissTokens: 8192, waitingPrefillTokens: 0 });
});

Deno.test("cacheAware() trades a prefix hit against queued tokens, token for token (Llumnix)", () => {
  const candidates = [
    candidate("cached-but-busy", { localPrefixTokens: 4000, waitingPrefillTokens: 6000 }),
    candidate("cold-idle", { waitingPrefillTokens: 1000 }),
  ];
  // miss + load: 4000 + 6000 = 10000 against 8000 + 1000 = 9000.
  assertEquals(
    createPolicy("cache_aware").select(request(8000), candidates, ctx()).ranking[0],
    "cold-idle",
  );
});

Deno.test("cacheAware() breaks a tie on the sum with the lower waiting prefill tokens", () => {
  const candidates = [
    candidate("busy-hit", { localPrefixTokens: 3000, waitingPrefillTokens: 3000 }),
    candidate("idle-miss", { localPrefixTokens: 0, waitingPrefillTokens: 0 }),
  ];
  assertEquals(
    createPolicy("cache_aware").select(request(3000), candidates, ctx()).ranking[0],
    "idle-miss",
  );
});

Deno.test("cacheAware() load filter demotes instances at the threshold unless all are over", () => {
  const policy = createPolicy("cache_aware", { loadFilterTokens: 2048 });
  const candidates = [
    candidate("hit-overloaded", { localPrefixTokens: 8000, waitingPrefillTokens: 2048 }),
    candidate("cold", { waitingPrefillTokens: 1000 }),
  ];
  const decision = policy.select(request(8192), candidates, ctx());
  assertEquals(decision.ranking, ["cold", "hit-overloaded"]);
  assert(decision.scores[0].terms.overLoadThreshold > 0);
  candidates[1].waitingPrefillTokens = 4096;
  assertEquals(policy.select(request(8192), candidates, ctx()).ranking[0], "hit-overloaded");
});

Deno.test("kvHitLen() picks the longest local prefix even when it is busier", () => {
  const candidates = [
    candidate("idle", { localPrefixTokens: 512 }),
    candidate("long", { localPrefixTokens: 4096, waitingPrefillTokens: 50_000 }),
  ];
  assertEquals(
    createPolicy("kv_hit_len").select(request(8192), candidates, ctx()).ranking[0],
    "long",
  );
});

Deno.test("kvHitLen() breaks equal prefixes with the lighter load", () => {
  const candidates = [
    candidate("busy", { localPrefixTokens: 4096, waitingPrefillTokens: 9000 }),
    candidate("light", { localPrefixTokens: 4096, waitingPrefillTokens: 10 }),
  ];
  assertEquals(
    createPolicy("kv_hit_len").select(request(8192), candidates, ctx()).ranking[0],
    "light",
  );
});

Deno.test("powerOfTwo() never picks the single most loaded instance", () => {
  const policy = createPolicy("power_of_two");
  const candidates = Array.from(
    { length: 8 },
    (_, i) => candidate(`i${i}`, { waitingPrefillTokens: i * 100 }),
  );
  const random = seededRandom(5);
  const winners = new Set<string>();
  for (let i = 0; i < 300; i++) {
    winners.add(policy.select(request(10), candidates, { random, sequence: i }).ranking[0]);
  }
  assert(!winners.has("i7"));
  assert(winners.size >= 5, `p2c should spread work, got ${[...winners]}`);
});

Deno.test("powerOfTwo() with two candidates always takes the lighter one", () => {
  const candidates = [candidate("heavy", { waitingPrefillTokens: 10 }), candidate("light")];
  for (let seed = 1; seed < 20; seed++) {
    assertEquals(createPolicy("power_of_two").select(request(10), candidates, ctx(seed)).ranking, [
      "light",
      "heavy",
    ]);
  }
});

Deno.test("mooncakeTtft() explains each candidate as queue + transfer + prefill seconds", () => {
  const decision = createPolicy("mooncake_ttft").select(
    request(20_000, 16_384),
    [candidate("a", {
      localPrefixTokens: 4096,
      waitingPrefillTokens: 8192,
      waitingPrefillRequests: 1,
    })],
    ctx(),
  );
  const terms = decision.scores[0].terms;
  assertEquals(Object.keys(terms), ["queueS", "transferS", "prefillS"]);
  assertAlmostEquals(terms.queueS, prefillTimeS(MOONCAKE_PREFILL_MODEL, 8192, 0), 1e-12);
  assertAlmostEquals(terms.transferS, (16_384 - 4096) * 327_680 / 85e9, 1e-12);
  assertAlmostEquals(
    terms.prefillS,
    prefillTimeS(MOONCAKE_PREFILL_MODEL, 20_000 - 16_384, 16_384),
    1e-12,
  );
  assertEquals(decision.scores[0].transferTokens, 16_384 - 4096);
  assertEquals(decision.predictedTtftS, decision.scores[0].score);
});

Deno.test("mooncakeTtft() sends work to an idle instance that loads the prefix from the pool", () => {
  const candidates = [
    candidate("holder", {
      localPrefixTokens: 30_000,
      waitingPrefillTokens: 16_000,
      waitingPrefillRequests: 2,
    }),
    candidate("idle"),
  ];
  const decision = createPolicy("mooncake_ttft").select(request(32_000, 30_000), candidates, ctx());
  assertEquals(decision.ranking[0], "idle");
  assertEquals(decision.scores[1].transferTokens, 30_000);
  // Without a pool the idle instance would recompute everything and the holder wins.
  const local = createPolicy("mooncake_ttft").select(request(32_000, 0), candidates, ctx());
  assertEquals(local.ranking[0], "holder");
});

Deno.test("mooncakeTtft() skips the transfer when the pool prefix is within the balancing threshold", () => {
  const policy = createPolicy("mooncake_ttft", { balancingThreshold: 1.5 });
  const decision = policy.select(request(20_000, 12_000), [
    candidate("a", { localPrefixTokens: 10_000 }),
  ], ctx());
  assertEquals(decision.scores[0].terms.transferS, 0);
  assertEquals(decision.scores[0].transferTokens, 0);
  const far = policy.select(request(20_000, 16_000), [
    candidate("a", { localPrefixTokens: 10_000 }),
  ], ctx());
  assertEquals(far.scores[0].transferTokens, 6_000);
});

Deno.test("mooncakeTtft() uses an instance's learned prefill model over the default", () => {
  const slow = { linear: 0.5, quadratic: 0.01 };
  const candidates = [
    candidate("slow", { prefillModel: slow }),
    candidate("normal", { waitingPrefillTokens: 1000 }),
  ];
  const decision = createPolicy("mooncake_ttft").select(request(16_000), candidates, ctx());
  assertEquals(decision.ranking[0], "normal");
  assertAlmostEquals(decision.scores[0].terms.prefillS, prefillTimeS(slow, 16_000, 0), 1e-12);
});

Deno.test("mooncakeTtft() prices a queue as its requests, not as one long prompt", () => {
  const decision = createPolicy("mooncake_ttft").select(
    request(1000),
    [candidate("a", { waitingPrefillTokens: 80_000, waitingPrefillRequests: 10 })],
    ctx(),
  );
  assertAlmostEquals(
    decision.scores[0].terms.queueS,
    10 * prefillTimeS(MOONCAKE_PREFILL_MODEL, 8000, 0),
    1e-9,
  );
  const given = createPolicy("mooncake_ttft").select(request(1000), [
    candidate("a", { queuedPrefillS: 7 }),
  ], ctx());
  assertEquals(given.scores[0].terms.queueS, 7);
});
