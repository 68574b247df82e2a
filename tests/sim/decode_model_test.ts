import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import {
  decodeStepS,
  DEFAULT_DECODE_MODEL,
  predictTbtS,
} from "../../src/scheduling/decode_model.ts";
import { SimDecodeEngine } from "../../src/sim/decode_engine.ts";
import { GapHistogram } from "../../src/sim/gap_histogram.ts";
import { maxBatchWithin } from "../../src/scheduling/decode_model.ts";

const KV = { baseS: 0.03, perRequestS: 0.0005, perKvTokenS: 4e-8 };

Deno.test("decodeStepS() without a KV term is unchanged: 30 ms + 0.5 ms per request", () => {
  assertEquals(decodeStepS(DEFAULT_DECODE_MODEL, 40), 0.03 + 0.0005 * 40);
  // A KV count passed to a model without the term changes nothing.
  assertEquals(
    decodeStepS(DEFAULT_DECODE_MODEL, 40, 1_000_000),
    decodeStepS(DEFAULT_DECODE_MODEL, 40),
  );
  assertEquals(predictTbtS(DEFAULT_DECODE_MODEL, [7, 3, 9]), decodeStepS(DEFAULT_DECODE_MODEL, 4));
  assertEquals(DEFAULT_DECODE_MODEL.perKvTokenS, undefined);
});

Deno.test("decodeStepS() adds the KV term over the batch's KV tokens, 40 ms per million", () => {
  assertAlmostEquals(decodeStepS(KV, 10, 250_000), 0.03 + 0.005 + 0.01, 1e-12);
  // The same batch with twice the context is slower by exactly the KV term.
  const short = decodeStepS(KV, 20, 200_000), long = decodeStepS(KV, 20, 400_000);
  assertAlmostEquals(long - short, 200_000 * 4e-8, 1e-12);
  // Knowing only the batch size, the model assumes kvTokensPerRequest each (0 without it).
  assertAlmostEquals(
    decodeStepS({ ...KV, kvTokensPerRequest: 12_000 }, 20),
    decodeStepS(KV, 20, 240_000),
    1e-12,
  );
  assertEquals(decodeStepS(KV, 20), 0.03 + 0.0005 * 20);
});

Deno.test("maxBatchWithin() is the largest batch whose step stays within the TBT SLO", () => {
  const router = { ...KV, kvTokensPerRequest: 12_000 };
  const n = maxBatchWithin(router, 0.05);
  assert(decodeStepS(router, n) <= 0.05 && decodeStepS(router, n + 1) > 0.05, `${n}`);
  assertEquals(maxBatchWithin(router, 0.001), 1);
});

Deno.test("SimDecodeEngine: the step grows with the batch's KV, which grows a token per step and leaves with the request", () => {
  const gaps = new GapHistogram();
  const engine = new SimDecodeEngine("d", KV, { onGap: (g) => gaps.add(g) });
  engine.add({
    requestIndex: 0,
    remainingTokens: 2,
    outputTokens: 2,
    joinS: 0,
    contextTokens: 100_000,
    lastTokenS: 0,
  });
  engine.add({
    requestIndex: 1,
    remainingTokens: 3,
    outputTokens: 3,
    joinS: 0,
    contextTokens: 50_000,
    lastTokenS: 0,
  });
  assertEquals(engine.kvTokens, 150_000);
  const first = engine.startStep()!;
  assertAlmostEquals(first, decodeStepS(KV, 2, 150_000), 1e-12);
  assertEquals(engine.finishStep(first), []);
  assertEquals(engine.kvTokens, 150_002);
  const second = engine.startStep()!;
  assertAlmostEquals(second, decodeStepS(KV, 2, 150_002), 1e-12);
  const done = engine.finishStep(first + second);
  assertEquals(done.map((j) => j.requestIndex), [0]);
  assertEquals(engine.kvTokens, 50_002);
  assertAlmostEquals(engine.startStep()!, decodeStepS(KV, 1, 50_002), 1e-12);
  assertEquals(gaps.count, 4);
});

Deno.test("SimDecodeEngine: beyond maxBatch requests wait, first in first out, and their wait shows in the gap", () => {
  const gaps = new GapHistogram();
  const engine = new SimDecodeEngine("d", KV, { maxBatch: 2, onGap: (g) => gaps.add(g) });
  for (let i = 0; i < 3; i++) {
    engine.add({
      requestIndex: i,
      remainingTokens: 1,
      outputTokens: 1,
      joinS: 0,
      contextTokens: 1000,
      lastTokenS: 0,
    });
  }
  assertEquals(engine.runningRequests, 3);
  const step = engine.startStep()!;
  assertEquals(engine.waitingRequests, 1);
  assertAlmostEquals(step, decodeStepS(KV, 2, 2000), 1e-12);
  assertEquals(engine.finishStep(step).map((j) => j.requestIndex), [0, 1]);
  const next = engine.startStep()!;
  assertEquals(engine.finishStep(step + next).map((j) => j.requestIndex), [2]);
  // The third request's only gap spans both steps.
  assertAlmostEquals(gaps.quantile(1), step + next, 1e-4);
});

Deno.test("GapHistogram: quantiles to 0.1 ms, shares within a limit, long gaps kept exactly", () => {
  const h = new GapHistogram();
  for (let i = 1; i <= 1000; i++) h.add(i / 1000); // 1 ms .. 1 s
  h.add(120); // beyond the bins
  assertAlmostEquals(h.quantile(0.5), 0.501, 2e-4);
  assertAlmostEquals(h.shareAtOrBelow(0.1), 100 / 1001, 2e-3);
  assertEquals(h.quantile(1), 120);
  assertEquals(h.quantiles([0.1, 0.9]).length, 2);
  assert(Number.isNaN(new GapHistogram().quantile(0.5)));
});
