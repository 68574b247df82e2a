/**
 * The peers' policies (dynamo_kv, llmd_default, sglang_cache_aware): their contract with
 * non-default parameters too (tests/scheduling/policy_contract_test.ts covers the defaults), each
 * upstream default and rule they reproduce, pinned one behaviour a test (the upstream commit each
 * follows is in its policy's doc comment), and their parameters' validation.
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

/** The ids ranked first over `seeds` decisions, each with its own seeded random. */
function firsts(
  name: string,
  params: PolicyParams,
  request: { promptTokens: number; poolPrefixTokens: number },
  candidates: Candidate[],
  seeds = 200,
): Set<string> {
  const policy = createPolicy(name, params);
  const winners = new Set<string>();
  for (let seed = 1; seed <= seeds; seed++) {
    winners.add(policy.select(request, candidates, ctx(seed)).ranking[0]);
  }
  return winners;
}

const req = (promptTokens: number) => ({ promptTokens, poolPrefixTokens: promptTokens });

// The upstream defaults, pinned: the policy with no parameters decides as with upstream's values
// spelled out, and differently from a neighbouring value.
Deno.test("each peer's defaults are upstream's: sglang 0.3/64/1.5, llm-d 3:2:2, dynamo weight 1 at temperature 0", () => {
  const spelled: [string, PolicyParams, PolicyParams][] = [
    ["sglang_cache_aware", {
      cacheThreshold: 0.3,
      balanceAbsThreshold: 64,
      balanceRelThreshold: 1.5,
    }, { cacheThreshold: 0.5 }],
    ["llmd_default", {
      prefixCacheWeight: 3,
      queueWeight: 2,
      kvCacheUtilizationWeight: 2,
    }, { prefixCacheWeight: 1 }],
    ["dynamo_kv", { overlapScoreWeight: 1, routerTemperature: 0 }, { overlapScoreWeight: 2 }],
  ];
  for (const [name, upstream, other] of spelled) {
    let differs = false;
    for (let seed = 1; seed <= 100; seed++) {
      const { request, candidates } = cluster(seed, 8);
      const byDefault = createPolicy(name).select(request, candidates, ctx(seed));
      assertEquals(byDefault, createPolicy(name, upstream).select(request, candidates, ctx(seed)));
      const changed = createPolicy(name, other).select(request, candidates, ctx(seed));
      if (JSON.stringify(changed.scores) !== JSON.stringify(byDefault.scores)) differs = true;
    }
    assert(differs, `${name}: ${JSON.stringify(other)} changes nothing`);
  }
});

// ---- SGLang cache_aware (smg-project/smg@v1.9.0 model_gateway/src/policies/cache_aware.rs) ----

/** `a` holds 60% of a 10k prompt and carries `aLoad` requests; `b` holds nothing. */
function sglangPair(aLoad: number, bLoad: number) {
  return createPolicy("sglang_cache_aware").select(req(10_000), [
    candidate("a", {
      localPrefixTokens: 6000,
      waitingPrefillRequests: Math.floor(aLoad / 2),
      runningRequests: aLoad - Math.floor(aLoad / 2),
    }),
    candidate("b", { waitingPrefillRequests: bLoad }),
  ], ctx(1));
}

Deno.test("sglang_cache_aware: imbalance needs max − min > 64 requests, strictly", () => {
  const at = sglangPair(74, 10); // 64 apart: balanced, the match wins
  assertEquals(at.ranking[0], "a");
  assertEquals(at.scores[0].detail!.imbalanced, 0);
  const past = sglangPair(75, 10); // 65 apart and 75 > 1.5 × 10: the least loaded
  assertEquals(past.ranking[0], "b");
  assertEquals(past.scores[0].detail!.imbalanced, 1);
});

Deno.test("sglang_cache_aware: imbalance also needs max > 1.5 × min, strictly", () => {
  const at = sglangPair(195, 130); // 65 apart but 195 = 1.5 × 130: balanced
  assertEquals(at.ranking[0], "a");
  assertEquals(at.scores[0].detail!.imbalanced, 0);
  const past = sglangPair(196, 130);
  assertEquals(past.ranking[0], "b");
  assertEquals(past.scores[0].detail!.imbalanced, 1);
});

Deno.test("sglang_cache_aware: the load is the requests in flight, waiting and running", () => {
  const decision = createPolicy("sglang_cache_aware").select(req(10_000), [
    candidate("a", { waitingPrefillRequests: 3, runningRequests: 4 }),
    candidate("b", { waitingPrefillRequests: 6 }),
  ], ctx(1));
  assertEquals(decision.scores.map((s) => s.terms.loadRequests), [7, 6]);
  assertEquals(decision.ranking[0], "b");
});

Deno.test("sglang_cache_aware: the match must exceed cache_threshold 0.3, strictly", () => {
  const policy = createPolicy("sglang_cache_aware");
  const pair = (held: number) =>
    policy.select(req(10_000), [
      candidate("holder", { localPrefixTokens: held, waitingPrefillRequests: 5 }),
      candidate("idle", { waitingPrefillRequests: 1 }),
    ], ctx(1));
  const at = pair(3000); // exactly 0.3: a miss
  assertEquals(at.ranking[0], "idle");
  assertEquals(at.scores[0].detail!.cacheHit, 0);
  const past = pair(3001);
  assertEquals(past.ranking[0], "holder");
  assertEquals(past.scores[0].detail!.cacheHit, 1);
});

Deno.test("sglang_cache_aware: a miss goes to the least-loaded worker, not the one with the least routed text", () => {
  // Upstream since sgl-project/sglang#14650: min load, where it was the smallest tree.
  const decision = createPolicy("sglang_cache_aware").select(req(10_000), [
    candidate("few-tokens", { waitingPrefillRequests: 2, waitingPrefillTokens: 100 }),
    candidate("few-requests", { waitingPrefillRequests: 1, waitingPrefillTokens: 50_000 }),
  ], ctx(1));
  assertEquals(decision.ranking[0], "few-requests");
  assertEquals(decision.scores[1].terms, { loadRequests: 1 });
});

Deno.test("sglang_cache_aware: a hit goes to a holder of the best match whatever its load, holders drawn", () => {
  const candidates = [
    candidate("busy-holder", { localPrefixTokens: 6000, waitingPrefillRequests: 30 }),
    candidate("idle-holder", { localPrefixTokens: 6000 }),
    candidate("idle-other", { localPrefixTokens: 5000 }),
  ];
  assertEquals(
    [...firsts("sglang_cache_aware", {}, req(10_000), candidates)].sort(),
    ["busy-holder", "idle-holder"],
  );
});

Deno.test("sglang_cache_aware: a best match held by an unhealthy worker goes to the first healthy worker", () => {
  const decision = createPolicy("sglang_cache_aware").select(req(10_000), [
    candidate("down", { healthy: false, localPrefixTokens: 9000 }),
    candidate("first", { waitingPrefillRequests: 5 }),
    candidate("partial", { localPrefixTokens: 5000 }),
  ], ctx(1));
  assertEquals(decision.ranking, ["first", "partial"]);
});

// ---- llm-d (llm-d/llm-d-router@v0.10.0 pkg/epp/config/loader/defaults.go and its scorers) ----

Deno.test("llmd_default: prefix ×3, queue ×2, free KV ×2, summed (a perfect endpoint scores 7)", () => {
  const decision = createPolicy("llmd_default").select(req(10_000), [
    candidate("perfect", { localPrefixTokens: 10_000 }),
    candidate("queued", { waitingPrefillRequests: 4 }),
  ], ctx(1));
  const perfect = decision.scores[0];
  assertEquals(perfect.terms, {
    prefixCacheScore: -3,
    queueScore: -2,
    kvCacheUtilizationScore: -2,
  });
  assertEquals(perfect.score, -7);
  assertEquals(decision.ranking, ["perfect", "queued"]);
});

Deno.test("llmd_default: the prefix score counts whole 64-token blocks of the prompt", () => {
  const prefix = (promptTokens: number, held: number) =>
    createPolicy("llmd_default").select(req(promptTokens), [
      candidate("a", { localPrefixTokens: held }),
    ], ctx(1)).scores[0].detail!.prefixScore;
  assertEquals(prefix(256, 127), 1 / 4); // 4 blocks, 1 whole one held
  assertEquals(prefix(256, 128), 2 / 4);
  assertEquals(prefix(100, 99), 1 / 2); // the partial last block counts only when all is held
  assertEquals(prefix(100, 100), 1);
  assertEquals(prefix(0, 0), 0);
});

Deno.test("llmd_default: at most 131072 prompt tokens (2048 blocks) are matched", () => {
  const prefix = (held: number) =>
    createPolicy("llmd_default").select(req(200_000), [
      candidate("a", { localPrefixTokens: held }),
    ], ctx(1)).scores[0].detail!.prefixScore;
  assertEquals(prefix(131_072), 1);
  assertEquals(prefix(131_071), 2047 / 2048);
});

Deno.test("llmd_default: the queue scorer is min-max over the candidates, 1 for all when equal", () => {
  const queue = (waiting: number[]) =>
    createPolicy("llmd_default").select(
      req(1000),
      waiting.map((w, i) => candidate(`c${i}`, { waitingPrefillRequests: w })),
      ctx(1),
    ).scores.map((s) => s.terms.queueScore);
  assertEquals(queue([0, 2, 4]), [-2, -1, -0]);
  assertEquals(queue([2, 2]), [-2, -2]);
});

Deno.test("llmd_default: equal totals are picked at random (max-score-picker shuffles)", () => {
  const candidates = [
    candidate("a", { runningRequests: 1 }),
    candidate("b", { runningRequests: 1 }),
  ];
  assertEquals([...firsts("llmd_default", {}, req(1000), candidates)].sort(), ["a", "b"]);
});

// ---- Dynamo (ai-dynamo/dynamo@07a6c9ce lib/kv-router/src/scheduling/selector/default.rs) ----

Deno.test("dynamo_kv: the lowest cache-credited prefill blocks plus decode blocks wins", () => {
  const request = req(16_000);
  const candidates = [
    candidate("cached", { localPrefixTokens: 12_000, waitingPrefillTokens: 6000 }),
    candidate("idle"),
    candidate("decoding", { runningRequests: 3 }),
  ];
  const decision = createPolicy("dynamo_kv").select(request, candidates, ctx(1));
  // cached: (6000 + 16000)/16 − 750 = 625 prefill, 375 live + (1000 − 750) = 625 decode;
  // idle: 1000 + 1000; decoding: 1000 + (3·8192/16 + 1000).
  assertEquals(decision.ranking, ["cached", "idle", "decoding"]);
  assertEquals(decision.scores[0].terms, { weightedPrefillBlocks: 625, decodeBlocks: 625 });
  assertEquals(decision.scores[1].score, 2000);
  assertEquals(decision.scores[2].score, 3536);
});

Deno.test("dynamo_kv: the overlap is counted in whole 16-token blocks", () => {
  const decision = createPolicy("dynamo_kv").select(req(1600), [
    candidate("31", { localPrefixTokens: 31 }),
    candidate("32", { localPrefixTokens: 32 }),
  ], ctx(1));
  assertEquals(decision.scores.map((s) => s.detail!.overlapBlocks), [1, 2]);
  assertEquals(decision.scores.map((s) => s.terms.weightedPrefillBlocks), [99, 98]);
});

Deno.test("dynamo_kv: an idle worker's cached prefix lowers its prefill blocks only, a busy one's its decode blocks too", () => {
  const decision = createPolicy("dynamo_kv", { runningRequestTokens: 160 }).select(req(1600), [
    candidate("idle", { localPrefixTokens: 800 }),
    candidate("busy", { localPrefixTokens: 800, runningRequests: 1 }),
  ], ctx(1));
  const [idle, busy] = decision.scores;
  assertEquals(idle.terms, { weightedPrefillBlocks: 50, decodeBlocks: 100 });
  assertEquals(idle.detail!.additionalBlocks, 100); // no live request shares its prompt
  assertEquals(busy.terms, { weightedPrefillBlocks: 50, decodeBlocks: 10 + 50 });
  assertEquals(busy.detail!.additionalBlocks, 50);
});

Deno.test("dynamo_kv: overlapScoreWeight is the deprecated overlap_score_weight, the prefill load scale", () => {
  const candidates = [
    candidate("a", { localPrefixTokens: 800, waitingPrefillTokens: 160 }),
    candidate("b", { runningRequests: 1 }),
  ];
  const terms = (overlapScoreWeight: number) =>
    createPolicy("dynamo_kv", { overlapScoreWeight, runningRequestTokens: 160 })
      .select(req(1600), candidates, ctx(1)).scores.map((s) => s.terms.weightedPrefillBlocks);
  assertEquals(terms(1), [(160 + 1600) / 16 - 50, 100]);
  assertEquals(terms(2), [2 * ((160 + 1600) / 16 - 50), 200]);
  assertEquals(terms(0), [0, 0]); // 0 also zeroes the overlap credit: load balancing on decode
  const blind = createPolicy("dynamo_kv", { overlapScoreWeight: 0 }).select(
    req(16_000),
    [candidate("a", { localPrefixTokens: 15_000, runningRequests: 2 }), candidate("b")],
    ctx(1),
  );
  assertEquals(blind.ranking[0], "b");
});

Deno.test("dynamo_kv: at temperature 0 equal costs are broken uniformly at random", () => {
  const candidates = [
    candidate("a", { localPrefixTokens: 500 }),
    candidate("b", { localPrefixTokens: 500 }),
  ];
  assertEquals([...firsts("dynamo_kv", {}, req(1000), candidates)].sort(), ["a", "b"]);
  const decision = createPolicy("dynamo_kv").select(req(1000), candidates, ctx(1));
  for (const s of decision.scores) assertEquals(s.terms.unsampled, undefined);
});

Deno.test("dynamo_kv: above temperature 0, P(worker) ∝ exp(−((cost − min) / (max − min)) / T)", () => {
  // Two workers, costs min and max: P(cheaper) = 1 / (1 + e^(−1/T)); at T = 1, 0.7311.
  const pCheaper = 1 / (1 + Math.exp(-1));
  const candidates = [candidate("cheap"), candidate("dear", { waitingPrefillTokens: 1600 })];
  const pick = (u: number) => {
    let first = true;
    const random = () => {
      if (!first) return 0.5;
      first = false;
      return u;
    };
    return createPolicy("dynamo_kv", { routerTemperature: 1 })
      .select(req(1600), candidates, { random, sequence: 0 }).ranking[0];
  };
  assertEquals(pick(pCheaper - 1e-9), "cheap");
  assertEquals(pick(pCheaper + 1e-9), "dear");
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
