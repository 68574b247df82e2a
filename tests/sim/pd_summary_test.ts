import { assertEquals } from "../assert.ts";
import { GapHistogram } from "../../src/sim/gap_histogram.ts";
import type { PdResult } from "../../src/sim/pd_simulator.ts";
import { summarizePd } from "../../src/sim/pd_summary.ts";

/** A made-up P/D result over the given TTFTs and TPOTs (NaN: refused, or nothing to decode). */
function resultOf(ttftS: number[], tpotS: number[]): PdResult {
  const n = ttftS.length;
  return {
    label: "made up",
    policy: "mooncake_ttft",
    admission: "early",
    topology: { kind: "pd", prefill: 1, decode: 1 },
    instanceNames: ["p0"],
    decodeNames: ["d0"],
    ttftS: Float64Array.from(ttftS),
    predictedTtftS: new Float64Array(n).fill(NaN),
    tpotS: Float64Array.from(tpotS),
    promptTokens: new Float64Array(n).fill(100),
    reusedTokens: new Float64Array(n),
    transferTokens: new Float64Array(n),
    instance: new Int32Array(n),
    decodeInstance: new Int32Array(n),
    rejectedByReason: { tbt_slo: ttftS.filter(Number.isNaN).length },
    rejectedAfterPrefill: 0,
    wastedPrefillTokens: 0,
    redundantPrefillTokens: 0,
    localPrefills: 0,
    lastArrivalS: 0,
    tbt: new GapHistogram(),
    timeline: { periodS: 1, waitingTokens: [] },
    load: { periodS: 1, prefill: [], decode: [], rejected: [] },
    busyS: [1],
    evictions: 0,
    batchKv: { sum: 0, count: 0 },
    endS: 10,
  };
}

Deno.test("summarizePd() counts a request served within both SLOs only when its TTFT and its TPOT (if any) are", () => {
  const summary = summarizePd(
    resultOf(
      // within both; refused; TTFT over; nothing to decode; TPOT over; both at the SLO exactly
      [1, NaN, 12, 2, 3, 10],
      [0.04, NaN, 0.04, NaN, 0.06, 0.05],
    ),
    10,
    0.05,
  );
  assertEquals(summary.withinBothSlos, 3);
  assertEquals([summary.served, summary.rejected], [5, 1]);
  assertEquals(summary.tbtSloRequestShare, 3 / 4);
});
