import { assert, assertEquals, assertNotEquals } from "../assert.ts";
import { DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { type PolicyRun, simulate } from "../../src/sim/simulator.ts";
import { summarize } from "../../src/sim/summary.ts";
import { conversationTrace, simTestConfig } from "./sim_test_config.ts";

const TRACE = await conversationTrace(500);

const config = simTestConfig;

const run = (policy: string, admission: PolicyRun["admission"] = "off"): PolicyRun => ({
  label: policy,
  policy,
  admission,
});

Deno.test("simulate() is deterministic for a seed", () => {
  const a = simulate(TRACE, config(), run("random"));
  const b = simulate(TRACE, config(), run("random"));
  assertEquals(Array.from(a.ttftS), Array.from(b.ttftS));
  assertEquals(Array.from(a.instance), Array.from(b.instance));
  const other = simulate(TRACE, config({ seed: 2 }), run("random"));
  assertNotEquals(Array.from(a.instance), Array.from(other.instance));
});

Deno.test("simulate() serves every request exactly once when admission is off", () => {
  const result = simulate(TRACE, config(), run("least_load"));
  const summary = summarize(result, 30);
  assertEquals(summary.served, TRACE.length);
  assertEquals(summary.rejected, 0);
  assert(result.ttftS.every((t) => t > 0));
  assert(result.instance.every((k) => k >= 0 && k < 8));
  assertEquals(result.timeline.waitingTokens.length, 8);
});

Deno.test("on the first 500 trace requests cache-aware routing reuses more than random routing", () => {
  const random = summarize(simulate(TRACE, config(), run("random")), 30);
  const cacheAware = summarize(simulate(TRACE, config(), run("cache_aware")), 30);
  const mooncake = summarize(simulate(TRACE, config(), run("mooncake_ttft")), 30);
  assert(cacheAware.hitRatio > random.hitRatio, `${cacheAware.hitRatio} vs ${random.hitRatio}`);
  assert(
    mooncake.hitRatio >= cacheAware.hitRatio,
    `${mooncake.hitRatio} vs ${cacheAware.hitRatio}`,
  );
  assert(mooncake.transferTokens > 0);
  assert(mooncake.meanTtftS < random.meanTtftS);
  assertEquals(random.transferTokens, 0);
});

Deno.test("simulate() with the pool off never transfers, even for mooncake_ttft", () => {
  const summary = summarize(simulate(TRACE, config({ kvPool: "off" }), run("mooncake_ttft")), 30);
  assertEquals(summary.transferTokens, 0);
});

Deno.test("TTFT admission under overload rejects with 429 reasons and keeps served requests near the SLO", () => {
  const overload = config({ instances: 2, speed: 4, sloTtftS: 10 });
  const admitted = simulate(TRACE, overload, run("mooncake_ttft", "ttft"));
  const open = summarize(simulate(TRACE, overload, run("mooncake_ttft")), 10);
  const summary = summarize(admitted, 10);
  assert(admitted.rejectedByReason.ttft_slo > 0);
  assertEquals(summary.served + summary.rejected, TRACE.length);
  assert(summary.p90TtftS < open.p90TtftS, `${summary.p90TtftS} vs ${open.p90TtftS}`);
  const byLoad = simulate(
    TRACE,
    { ...overload, loadThresholdTokens: 50_000 },
    run("least_load", "load"),
  );
  assert(byLoad.rejectedByReason.load_threshold > 0);
});

Deno.test("simulate() with decode instances measures TPOT and rejects on the TBT SLO", () => {
  const withDecode = simulate(TRACE, config({ decodeInstances: 2 }), run("least_load"));
  const tpots = Array.from(withDecode.tpotS).filter((v) => !Number.isNaN(v));
  assert(tpots.length > 400);
  assert(tpots.every((v) => v >= DEFAULT_DECODE_MODEL.baseS));
  const strict = simulate(
    TRACE,
    config({ decodeInstances: 1, sloTbtS: 0.035 }),
    run("least_load", "ttft"),
  );
  assert(strict.rejectedByReason.tbt_slo > 0);
});

Deno.test("online refinement learns slower and faster instances and predicts TTFT better", () => {
  const mixed = config({ heterogeneity: 0.5, speed: 2 });
  const refined = summarize(simulate(TRACE, mixed, run("mooncake_ttft")), 30);
  const prior = summarize(simulate(TRACE, { ...mixed, refine: false }, run("mooncake_ttft")), 30);
  assert(
    refined.meanAbsPredictionErrorS < prior.meanAbsPredictionErrorS,
    `${refined.meanAbsPredictionErrorS} vs ${prior.meanAbsPredictionErrorS}`,
  );
});

Deno.test("simulate() keeps an explained decision for the docs", () => {
  const result = simulate(TRACE, config(), run("mooncake_ttft"));
  const decision = result.exampleDecision!;
  assertEquals(decision.policy, "mooncake_ttft");
  assertEquals(decision.scores.length, 8);
  assert(decision.predictedTtftS! > 0);
});

Deno.test("simulate() with arms plans each request with its arm's policy", () => {
  const cfg = config({ instances: 4 });
  const of = new Int32Array(TRACE.length).map((_, i) => i % 2);
  const same = simulate(TRACE, cfg, {
    ...run("random"),
    arms: { policies: [{ name: "cache_aware" }, { name: "cache_aware" }], of },
  });
  // Two arms running the same policy are that policy.
  assertEquals(
    Array.from(same.instance),
    Array.from(simulate(TRACE, cfg, run("cache_aware")).instance),
  );
  const mixed = simulate(TRACE, cfg, {
    ...run("cache_aware"),
    arms: { policies: [{ name: "cache_aware" }, { name: "round_robin" }], of },
  });
  assertNotEquals(Array.from(mixed.instance), Array.from(same.instance));
});
