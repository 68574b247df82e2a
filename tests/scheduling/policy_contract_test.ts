import { assert, assertEquals, assertThrows } from "../assert.ts";
import { createPolicy, POLICY_NAMES } from "../../src/scheduling/registry.ts";
import type { Candidate, ScheduleContext, ScheduleRequest } from "../../src/scheduling/types.ts";
import { seededRandom } from "../../src/sim/rng.ts";

/** A random cluster: some unhealthy, assorted prefixes and loads, many ties on purpose. */
function cluster(
  seed: number,
  size: number,
): { request: ScheduleRequest; candidates: Candidate[] } {
  const random = seededRandom(seed);
  const promptTokens = 1 + Math.floor(random() * 40_000);
  const poolPrefixTokens = Math.floor(random() * promptTokens);
  const candidates = Array.from({ length: size }, (_, i): Candidate => ({
    id: `i${i}`,
    healthy: random() > 0.25,
    localPrefixTokens: random() < 0.5 ? 0 : Math.floor(random() * poolPrefixTokens),
    waitingPrefillTokens: Math.floor(random() * 4) * 8192,
    waitingPrefillRequests: Math.floor(random() * 4),
    runningRequests: Math.floor(random() * 3),
  }));
  return { request: { promptTokens, poolPrefixTokens }, candidates };
}

const context = (seed: number, sequence = 0): ScheduleContext => ({
  random: seededRandom(seed),
  sequence,
});

for (const name of POLICY_NAMES) {
  Deno.test(`${name}: the same inputs and seed give the same decision`, () => {
    for (let seed = 1; seed <= 20; seed++) {
      const { request, candidates } = cluster(seed, 12);
      const a = createPolicy(name).select(request, candidates, context(seed, seed));
      const b = createPolicy(name).select(
        request,
        structuredClone(candidates),
        context(seed, seed),
      );
      assertEquals(a, b);
    }
  });

  Deno.test(`${name}: ranks exactly the healthy candidates and never an unhealthy one`, () => {
    for (let seed = 1; seed <= 200; seed++) {
      const { request, candidates } = cluster(seed, 1 + (seed % 64));
      const decision = createPolicy(name).select(request, candidates, context(seed, seed));
      const healthy = candidates.filter((c) => c.healthy).map((c) => c.id);
      assertEquals([...decision.ranking].sort(), [...healthy].sort());
      for (const score of decision.scores) {
        const candidate = candidates.find((c) => c.id === score.id)!;
        assertEquals(score.excluded !== undefined, !candidate.healthy);
      }
    }
  });

  Deno.test(`${name}: every candidate is scored and its terms add up to its score`, () => {
    for (let seed = 1; seed <= 100; seed++) {
      const { request, candidates } = cluster(seed, 16);
      const decision = createPolicy(name).select(request, candidates, context(seed));
      assertEquals(decision.policy, name);
      assertEquals(decision.scores.map((s) => s.id), candidates.map((c) => c.id));
      for (const score of decision.scores) {
        const sum = Object.values(score.terms).reduce((a, b) => a + b, 0);
        assert(
          Math.abs(sum - score.score) <= 1e-9 * Math.max(1, Math.abs(sum)),
          `${score.id}: ${sum} ≠ ${score.score}`,
        );
        assert(Number.isFinite(score.score));
      }
    }
  });

  Deno.test(`${name}: the ranking is in ascending score order, best first`, () => {
    for (let seed = 1; seed <= 100; seed++) {
      const { request, candidates } = cluster(seed, 16);
      const decision = createPolicy(name).select(request, candidates, context(seed, seed));
      const byId = new Map(decision.scores.map((s) => [s.id, s.score]));
      for (let i = 1; i < decision.ranking.length; i++) {
        assert(byId.get(decision.ranking[i - 1])! <= byId.get(decision.ranking[i])!);
      }
    }
  });

  Deno.test(`${name}: with no healthy candidate the ranking is empty instead of throwing`, () => {
    const { request, candidates } = cluster(5, 4);
    for (const c of candidates) c.healthy = false;
    const decision = createPolicy(name).select(request, candidates, context(1));
    assertEquals(decision.ranking, []);
    assertEquals(decision.scores.length, 4);
  });
}

Deno.test("createPolicy() names every valid policy when given an unknown one", () => {
  const error = assertThrows(
    () => createPolicy("fastest"),
    Error,
    'Unknown scheduling policy "fastest"',
  );
  for (const name of POLICY_NAMES) assert(error.message.includes(name), name);
});

Deno.test("createPolicy() lists every invalid parameter at once", () => {
  const error = assertThrows(() =>
    createPolicy("mooncake_ttft", {
      transferBytesPerS: 0,
      balancingThreshold: 0.5,
      prefillModel: { linear: -1, quadratic: 0.1 },
    })
  );
  for (const part of ["transferBytesPerS", "balancingThreshold", "prefillModel.linear"]) {
    assert(error.message.includes(part), `${part} missing from: ${error.message}`);
  }
});

Deno.test("POLICY_NAMES lists the eleven policies (eight own, three peers')", () => {
  assertEquals([...POLICY_NAMES].sort(), [
    "affinity_ttft",
    "cache_aware",
    "dynamo_kv",
    "kv_hit_len",
    "least_load",
    "llmd_default",
    "mooncake_ttft",
    "power_of_two",
    "random",
    "round_robin",
    "sglang_cache_aware",
  ]);
});

// How fast a decision is (well under a millisecond for 64 candidates) is a benchmark's claim:
// tests/bench/policy_decision_bench.ts.
Deno.test("a policy decides 64 candidates 200 times in a row, ranking all of them each time", () => {
  const { request, candidates } = cluster(9, 64);
  for (const c of candidates) c.healthy = true;
  const ids = candidates.map((c) => c.id).sort();
  for (const name of POLICY_NAMES) {
    const policy = createPolicy(name);
    for (let i = 0; i < 200; i++) {
      const decision = policy.select(request, candidates, context(i, i));
      assertEquals([...decision.ranking].sort(), ids, `${name}, decision ${i}`);
    }
  }
});
