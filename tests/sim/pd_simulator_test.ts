/**
 * The P/D simulator on bounded slices of the shared trace: the Mooncake paper's three P/D
 * results, each as far as this simulator reproduces it (docs/sim/pd/README.md), plus the
 * bookkeeping they rest on.
 */
import { assert, assertEquals } from "../assert.ts";
import type { DecodeLoadScope } from "../../src/scheduling/pd_admission.ts";
import {
  type DecodeKvView,
  type PdAdmission,
  type PdConfig,
  type PdTopology,
  simulatePd,
} from "../../src/sim/pd_simulator.ts";
import { summarizePd } from "../../src/sim/pd_summary.ts";
import { parseMooncakeTrace, type TraceRequest } from "../../src/sim/trace.ts";
import { pdTestConfig } from "./pd_test_config.ts";

const TEXT = await Deno.readTextFile(new URL("../data/conversation_trace.jsonl", import.meta.url));
const SLICE = parseMooncakeTrace(TEXT, { limit: 3000 });
const PD: PdTopology = { kind: "pd", prefill: 8, decode: 8 };

const config = pdTestConfig;

function run(
  policy: string,
  options:
    & {
      topology?: PdTopology;
      admission?: PdAdmission;
      decodeLoad?: DecodeLoadScope;
      decodeKv?: DecodeKvView;
      trace?: TraceRequest[];
    }
    & Partial<PdConfig> = {},
) {
  const {
    topology = PD,
    admission = "off",
    decodeLoad,
    decodeKv,
    trace = SLICE,
    ...overrides
  } = options;
  const cfg = config(trace, overrides);
  const run = { label: policy, policy, topology, admission, decodeLoad, decodeKv };
  const result = simulatePd(trace, cfg, run);
  return { result, summary: summarizePd(result, cfg.sloTtftS, cfg.sloTbtS) };
}

Deno.test("P/D: every request is prefilled once and decoded on a decode instance; deterministic", () => {
  const a = run("mooncake_ttft");
  const b = run("mooncake_ttft");
  assertEquals(Array.from(a.result.ttftS), Array.from(b.result.ttftS));
  assertEquals(a.summary.served, SLICE.length);
  assertEquals(a.summary.rejected, 0);
  SLICE.forEach((request, i) => {
    assert(a.result.instance[i] >= 0 && a.result.instance[i] < 8);
    if (request.outputLength > 1) {
      assert(a.result.decodeInstance[i] >= 0 && a.result.decodeInstance[i] < 8, `request ${i}`);
      assert(a.result.tpotS[i] >= 0.03, `request ${i}: ${a.result.tpotS[i]}`);
    }
  });
  const tpotMisses = Array.from(a.result.tpotS).filter((tpot) => tpot > 0.05).length;
  assert(a.summary.withinBothSlos <= a.summary.served - tpotMisses, `${a.summary.withinBothSlos}`);
  const tokens = SLICE.reduce((sum, r) => sum + Math.max(0, r.outputLength - 2), 0);
  assert(a.result.tbt.count >= tokens, `${a.result.tbt.count} gaps for ${tokens} tokens`);
});

Deno.test("Fig. 8 (8P+8D): mean TTFT random > least_load > cache_aware ≥ mooncake_ttft", () => {
  const mean = (policy: string) => run(policy).summary.meanTtftS;
  const [random, leastLoad, cacheAware, mooncake] = [
    "random",
    "least_load",
    "cache_aware",
    "mooncake_ttft",
  ].map(mean);
  assert(random > leastLoad, `${random} vs ${leastLoad}`);
  assert(leastLoad > cacheAware, `${leastLoad} vs ${cacheAware}`);
  assert(cacheAware >= mooncake, `${cacheAware} vs ${mooncake}`);
});

Deno.test("Table 3 (overload): baseline > early rejection > early rejection based on prediction, which damps the oscillation", () => {
  const at = (admission: PdAdmission, decodeLoad: DecodeLoadScope = "pool") =>
    run("mooncake_ttft", { admission, speed: 3.2, decodeLoad }).summary;
  const baseline = at("baseline"), early = at("early"), predicted = at("predicted");
  // The baseline learns the decode side is full only once the prefill is done: wasted work.
  assert(baseline.rejectedAfterPrefill > 0 && baseline.wastedPrefillTokens > 0);
  for (const s of [early, predicted]) {
    assertEquals([s.rejectedAfterPrefill, s.wastedPrefillTokens], [0, 0]);
    assert(s.rejected > 0);
  }
  // Judging the decode pool's load before the prefill saves the baseline's wasted prefills.
  assert(baseline.rejected > early.rejected, `${baseline.rejected} vs ${early.rejected}`);
  // Judging it now, before a prefill that ends seconds later, oscillates in anti-phase (Fig. 9);
  // forecasting it to the prefill's end rejects fewer and damps it (Fig. 10).
  assert(early.rejected > predicted.rejected, `${early.rejected} vs ${predicted.rejected}`);
  assert(early.load.prefillCv > predicted.load.prefillCv);
  assert(early.load.correlation < predicted.load.correlation);
  assert(early.load.correlation < -0.2, `${early.load.correlation}`);
  // Judged on the chosen instance alone (decodeLoad "instance"), `early` refuses more than the
  // baseline (docs/sim/pd/README.md §2).
  const instanceEarly = at("early", "instance");
  assert(instanceEarly.rejected > baseline.rejected, `${instanceEarly.rejected}`);
});

Deno.test("§8.1.3: P/D keeps TBT within its SLO where as many neutral instances do not, chunked or not", () => {
  const pd = run("mooncake_ttft").summary;
  assert(pd.tbtP99S <= 0.05 * 1.1, `P/D TBT p99 ${pd.tbtP99S}`);
  for (const chunked of [false, true]) {
    const neutral = run("mooncake_ttft", {
      topology: { kind: "neutral", instances: 16, chunked, chunkTokens: 2048 },
    }).summary;
    const what = chunked ? "chunked" : "whole prompts";
    assert(neutral.tbtP99S > 2 * pd.tbtP99S, `${what}: p99 ${neutral.tbtP99S} vs ${pd.tbtP99S}`);
    assert(neutral.tbtSloTokenShare < pd.tbtSloTokenShare, what);
    assert(neutral.tbtSloRequestShare < pd.tbtSloRequestShare, what);
    assert(neutral.withinBothSlos < pd.withinBothSlos, `${what}: ${neutral.withinBothSlos}`);
    assertEquals(neutral.served, SLICE.length);
  }
});

Deno.test("P/D: the pool loads and refusals are sampled over the whole run", () => {
  const { result, summary } = run("mooncake_ttft", { admission: "predicted", speed: 3.2 });
  assertEquals(result.load.prefill.length, result.load.decode.length);
  assert(result.load.prefill.length > 300);
  assertEquals(
    result.load.rejected.reduce((a, b) => a + b, 0),
    summary.rejected,
    "every refusal falls in a sample",
  );
  assert(Object.keys(result.rejectedByReason).every((r) => ["ttft_slo", "tbt_slo"].includes(r)));
});

Deno.test("P/D: judged on the request's prompt and the batch cap, a decode-constrained cluster serves more within both SLOs", () => {
  // 12P+4D at 3.2×: the decode batches bind. The guess prices every request at the trace's mean
  // context; a long prompt joining a busy batch slows every step of it (pd_test_config.ts).
  const options = {
    topology: { kind: "pd", prefill: 12, decode: 4 } as const,
    speed: 3.2,
    admission: "baseline" as const,
  };
  const guess = run("mooncake_ttft", options).summary;
  for (const decodeKv of ["prompt", "reported"] as const) {
    const judged = run("mooncake_ttft", { ...options, decodeKv }).summary;
    assertEquals(judged.decodeKv, decodeKv);
    assert(
      judged.tbtSloRequestShare > guess.tbtSloRequestShare + 0.05,
      `${decodeKv}: TPOT within the SLO ${judged.tbtSloRequestShare}, guess ${guess.tbtSloRequestShare}`,
    );
    assert(
      judged.withinBothSlos > guess.withinBothSlos * 1.05,
      `${decodeKv}: within both SLOs ${judged.withinBothSlos}, guess ${guess.withinBothSlos}`,
    );
  }
});

Deno.test("P/D: `decodeKv: guess` judges exactly as a run without the option", () => {
  const options = { topology: { kind: "pd", prefill: 6, decode: 2 } as const, speed: 3.2 };
  for (const admission of ["baseline", "early", "predicted"] as const) {
    const before = run("mooncake_ttft", { ...options, admission }).result;
    const guess = run("mooncake_ttft", { ...options, admission, decodeKv: "guess" }).result;
    assertEquals(Array.from(guess.ttftS), Array.from(before.ttftS), admission);
    assertEquals(Array.from(guess.tpotS), Array.from(before.tpotS), admission);
    assertEquals(guess.rejectedByReason, before.rejectedByReason, admission);
  }
});
