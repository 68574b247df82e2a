/**
 * Conditional disaggregation in the P/D simulator (docs/sim/pd/README.md): the decode side's
 * prefix cache and local prefill (src/sim/decode_prefill.ts), and the replay calling the router's
 * `decideLocalPrefill` under `--local-prefill`.
 */
import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { decodeStepS } from "../../src/scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../../src/scheduling/prefill_model.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import {
  decodeSideEngines,
  heldPrefixTokens,
  keepArrivedPrefix,
  type LocalPrefillSetting,
} from "../../src/sim/decode_prefill.ts";
import { newPrefillJob } from "../../src/sim/prefill_engine.ts";
import { type PdAdmission, simulatePd } from "../../src/sim/pd_simulator.ts";
import { summarizePd } from "../../src/sim/pd_summary.ts";
import { parseMooncakeTrace, type TraceRequest } from "../../src/sim/trace.ts";
import { pdTestConfig, TEST_DECODE_MODEL } from "./pd_test_config.ts";

const DECODE = TEST_DECODE_MODEL;
const config = (trace: readonly TraceRequest[], speed = 3.2) => pdTestConfig(trace, { speed });

function sides(chunkTokens?: number) {
  return decodeSideEngines(
    ["decode-00"],
    {
      engineModel: MOONCAKE_PREFILL_MODEL,
      engineDecodeModel: DECODE,
      blockTokens: 512,
      decodeKvCapacityTokens: 1_500_000,
      ttft: resolveTtftParams(),
    },
    () => {},
    chunkTokens,
  );
}

const decodeJob = (i: number) => ({
  requestIndex: i,
  remainingTokens: 10,
  outputTokens: 10,
  joinS: 0,
  contextTokens: 1000,
  lastTokenS: 0,
});

Deno.test("decode side: a local prefill runs whole first and holds back the batch's steps", () => {
  const [side] = sides();
  const running = decodeJob(0);
  side.decode.add(running);
  side.prefill.enqueue(newPrefillJob(1, 4096, [1, 2, 3, 4, 5, 6, 7, 8], false));
  const first = side.start(0)!;
  assertEquals(first, prefillTimeS(MOONCAKE_PREFILL_MODEL, 4096, 0));
  const stalled = side.finish(first);
  assertEquals(stalled.prefilled.map((j) => j.requestIndex), [1]);
  assertEquals(stalled.decoded, []);
  assertEquals(running.remainingTokens, 10, "no token while the prefill ran");
  // Then the batch steps again, its next gap including the prefill.
  const step = side.start(first)!;
  assertEquals(step, decodeStepS(DECODE, 1, 1000));
  side.finish(first + step);
  assertEquals(running.remainingTokens, 9);
  assertEquals(running.lastTokenS, first + step);
});

Deno.test("decode side with chunked prefill: each step decodes the batch and computes one chunk", () => {
  const [side] = sides(1024);
  const running = decodeJob(0);
  side.decode.add(running);
  side.prefill.enqueue(newPrefillJob(1, 4096, [1, 2, 3, 4, 5, 6, 7, 8], false));
  let now = 0;
  for (let chunk = 0; chunk < 4; chunk++) {
    const cost = side.start(now)!;
    const context = chunk * 1024;
    const chunkS = prefillTimeS(MOONCAKE_PREFILL_MODEL, context + 1024) -
      prefillTimeS(MOONCAKE_PREFILL_MODEL, context);
    assertAlmostEquals(cost, decodeStepS(DECODE, 1, 1000 + chunk) + chunkS, 1e-9);
    now += cost;
    const done = side.finish(now);
    assertEquals(done.prefilled.map((j) => j.requestIndex), chunk === 3 ? [1] : []);
    assertEquals(running.remainingTokens, 9 - chunk, "a token with every chunk");
  }
});

Deno.test("decode side: its prefix cache holds local prefills and arrived KV, and later prefills hit it", () => {
  const [side] = sides();
  const prefix = [11, 12, 13, 14];
  assertEquals(heldPrefixTokens(side, prefix, 2048, 512), 0);
  side.prefill.enqueue(newPrefillJob(0, 2048, prefix, false));
  const cold = side.start(0)!;
  side.finish(cold);
  assertEquals(heldPrefixTokens(side, [...prefix, 15], 2560, 512), 2048);
  side.prefill.enqueue(newPrefillJob(1, 2560, [...prefix, 15], false));
  const warm = side.start(cold)!;
  const [job] = side.finish(cold + warm).prefilled;
  assertEquals(job.cachedTokens, 2048);
  assertEquals(job.newTokens, 512);
  assert(warm < cold, `${warm} s with the prefix held, ${cold} s without`);
  keepArrivedPrefix(side, [21, 22]);
  assertEquals(heldPrefixTokens(side, [21, 22, 23], 1536, 512), 1024);
});

const TEXT = await Deno.readTextFile(new URL("../data/conversation_trace.jsonl", import.meta.url));
const SLICE = parseMooncakeTrace(TEXT, { limit: 1000 });
const TOPOLOGY = { kind: "pd" as const, prefill: 3, decode: 2 };

function replay(admission: PdAdmission, localPrefill?: LocalPrefillSetting, sloTbtS = 0.05) {
  const cfg = { ...config(SLICE), sloTbtS };
  const run = { label: "x", policy: "mooncake_ttft", topology: TOPOLOGY, admission, localPrefill };
  const result = simulatePd(SLICE, cfg, run);
  return { result, summary: summarizePd(result, cfg.sloTtftS, cfg.sloTbtS) };
}

/** The same replays before the decode side could prefill (5c7132f: simulatePd, summarizePd). */
const BEFORE = {
  baseline: {
    served: 277,
    rejected: 723,
    rejectedAfterPrefill: 354,
    wastedPrefillTokens: 1216591,
    withinBothSlos: 246,
    meanTtftS: 8.679939326235756,
    tbtP99S: 0.045200000000000004,
  },
  predicted: {
    served: 269,
    rejected: 731,
    rejectedAfterPrefill: 0,
    wastedPrefillTokens: 0,
    withinBothSlos: 141,
    meanTtftS: 7.2696864305528015,
    tbtP99S: 0.0488,
  },
};

Deno.test("--local-prefill off leaves the results as they were before the decode side could prefill", () => {
  for (const admission of ["baseline", "predicted"] as const) {
    const absent = replay(admission);
    const off = replay(admission, { mode: "off", maxTokens: 1000 });
    const { localPrefill, ...offRest } = off.summary;
    assertEquals(offRest, absent.summary, admission);
    assertEquals(localPrefill?.localPrefills, 0);
    assertEquals(Array.from(off.result.ttftS), Array.from(absent.result.ttftS));
    const s = absent.summary;
    assertEquals({
      served: s.served,
      rejected: s.rejected,
      rejectedAfterPrefill: s.rejectedAfterPrefill,
      wastedPrefillTokens: s.wastedPrefillTokens,
      withinBothSlos: s.withinBothSlos,
      meanTtftS: s.meanTtftS,
      tbtP99S: s.tbtP99S,
    }, BEFORE[admission]);
  }
});

/** Two requests of one prefix, 1P+1D: the second's suffix past the first is one block. */
function prefixPair(): TraceRequest[] {
  const prefix = Array.from({ length: 10 }, (_, b) => 100 + b);
  return [
    { timestampMs: 0, inputLength: 5120, outputLength: 20, hashIds: prefix },
    { timestampMs: 60_000, inputLength: 5632, outputLength: 20, hashIds: [...prefix, 999] },
  ];
}

function replayPair(localPrefill: LocalPrefillSetting) {
  const trace = prefixPair();
  const run = {
    label: "pair",
    policy: "mooncake_ttft",
    topology: { kind: "pd" as const, prefill: 1, decode: 1 },
    admission: "off" as const,
    localPrefill,
  };
  return simulatePd(trace, config(trace, 1), run);
}

Deno.test("threshold: a short uncached suffix on the decode instance is prefilled there, a long one is not", () => {
  const threshold = replayPair({ mode: "threshold", maxTokens: 1000 });
  assertEquals(threshold.localPrefills, 1);
  // The first (5,120 uncached tokens) went to the prefill instance; its KV stayed on decode-00.
  assertEquals(threshold.instance[0], 0);
  // The second lacked one block there: prefilled locally on the cached 5,120 tokens.
  assertEquals(threshold.instance[1], -1);
  assertEquals(threshold.decodeInstance[1], 0);
  assertEquals(threshold.reusedTokens[1], 5120);
  assert(threshold.ttftS[1] > 0 && threshold.tpotS[1] > 0);
  // Below the suffix, or switched off: both go to the prefill instance.
  for (const setting of [{ mode: "threshold", maxTokens: 511 }, { mode: "off", maxTokens: 1000 }]) {
    const remote = replayPair(setting as LocalPrefillSetting);
    assertEquals(remote.localPrefills, 0);
    assertEquals(Array.from(remote.instance), [0, 0]);
  }
});

Deno.test("the TBT guard: under a tight TBT SLO decoding instances take fewer local prefills", () => {
  const setting = { mode: "threshold", maxTokens: 1000 } as const;
  const loose = replay("early", setting, 1).result;
  const tight = replay("early", setting, 0.05).result;
  assert(loose.localPrefills > 0, "a loose SLO leaves room for local prefills");
  assert(
    tight.localPrefills < loose.localPrefills,
    `${tight.localPrefills} < ${loose.localPrefills}`,
  );
});

Deno.test("the TBT guard with chunked prefill: a tight SLO lets through what it refused whole", () => {
  const whole = replay("early", { mode: "threshold", maxTokens: 1000 }, 0.05).result;
  const chunked = replay("early", { mode: "threshold", maxTokens: 1000, chunkTokens: 64 }, 0.05)
    .result;
  assert(
    chunked.localPrefills > whole.localPrefills,
    `${chunked.localPrefills} > ${whole.localPrefills}`,
  );
});

Deno.test("--local-prefill runs report local prefills, goodput and wasted prefill tokens", () => {
  // A TBT SLO loose enough that the guard lets local prefills through.
  const { summary } = replay("baseline", { mode: "threshold", maxTokens: 1000 }, 1);
  const local = summary.localPrefill!;
  assertEquals(local.mode, "threshold");
  assert(local.localPrefills > 0);
  assertEquals(
    local.wastedTotalTokens,
    summary.wastedPrefillTokens + local.redundantPrefillTokens,
  );
  assert(local.goodputRps > 0 && Number.isFinite(local.goodputRps));
});
