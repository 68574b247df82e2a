import { assert, assertEquals } from "../assert.ts";
import { decodeStepS, DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { admitPd, forecastDecodeLoad, poolForecast } from "../../src/scheduling/pd_admission.ts";

const decodeModel = DEFAULT_DECODE_MODEL;
// 30 ms + 0.5 ms per request: a 50 ms TBT SLO holds up to 39 requests in the batch.
const options = { enabled: true, ttftSloS: 10, tbtSloS: 0.05, decodeModel } as const;

Deno.test("forecastDecodeLoad() adds the requests joining before then and removes the ones expected to leave", () => {
  const forecast = { runningNow: 40, joiningInS: [0.5, 1, 4], meanDecodeS: 8 };
  assertEquals(forecastDecodeLoad(forecast, 0), 0 + 40);
  assertEquals(forecastDecodeLoad(forecast, 2), 40 * (1 - 2 / 8) + 2);
  assertEquals(
    forecastDecodeLoad(forecast, 9),
    1,
    "only the joiner at 4 s is still decoding at 9 s",
  );
  assertEquals(forecastDecodeLoad(forecast, 16), 0, "every request, running or joining, has left");
});

Deno.test("admitPd() early: a decode instance over its TBT SLO now refuses before any prefill", () => {
  const decode = { instanceId: "d0", forecast: { runningNow: 60, joiningInS: [], meanDecodeS: 4 } };
  const { verdict, decodeBatch, predictedTbtS } = admitPd(
    { predictedTtftS: 2, prefillInstanceId: "p0", decode },
    { ...options, mode: "early" },
  );
  assert(!verdict.admit);
  assertEquals(verdict.reason, "tbt_slo");
  assertEquals([decodeBatch, predictedTbtS], [60, decodeStepS(decodeModel, 61)]);
});

Deno.test("admitPd() predicted: the same load admits when it will have drained by the end of the prefill", () => {
  const decode = { instanceId: "d0", forecast: { runningNow: 60, joiningInS: [], meanDecodeS: 4 } };
  const { verdict, decodeBatch } = admitPd(
    { predictedTtftS: 2, prefillInstanceId: "p0", decode },
    { ...options, mode: "predicted" },
  );
  assert(verdict.admit, JSON.stringify(verdict));
  assertEquals(decodeBatch, 30);
});

Deno.test("admitPd() predicted: requests about to join count against the SLO although the batch is small now", () => {
  const joiningInS = Array.from({ length: 45 }, (_, i) => i * 0.01);
  const decode = { instanceId: "d0", forecast: { runningNow: 2, joiningInS, meanDecodeS: 4 } };
  const early = admitPd({ predictedTtftS: 1, decode }, { ...options, mode: "early" });
  const predicted = admitPd({ predictedTtftS: 1, decode }, { ...options, mode: "predicted" });
  assert(early.verdict.admit);
  assert(!predicted.verdict.admit);
});

Deno.test("admitPd() committed: every request bound for the instance counts, however late its prefill ends", () => {
  // 20 decoding, 25 prefilling for it, the last joining long after this request's prefill and
  // the first ones expected to have left by then: only committed counts all 45.
  const joiningInS = Array.from({ length: 25 }, (_, i) => 3 + i);
  const decode = { instanceId: "d0", forecast: { runningNow: 20, joiningInS, meanDecodeS: 40 } };
  const judged = (mode: "early" | "predicted" | "committed") =>
    admitPd({ predictedTtftS: 1, decode }, { ...options, mode });
  assertEquals(
    [judged("early").decodeBatch, judged("predicted").decodeBatch, judged("committed").decodeBatch],
    [20, 20 * (1 - 1 / 40), 45],
  );
  assert(judged("early").verdict.admit);
  assert(judged("predicted").verdict.admit);
  const committed = judged("committed").verdict;
  assert(!committed.admit);
  assertEquals(committed.reason, "tbt_slo");
  assertEquals(judged("committed").predictedTbtS, decodeStepS(decodeModel, 46));
});

Deno.test("admitPd() committed on the pool: the pool's bound requests spread over its instances", () => {
  const pool = poolForecast([
    { runningNow: 30, joiningInS: [1, 2], meanDecodeS: 4 },
    { runningNow: 10, joiningInS: [5, 6, 7, 8], meanDecodeS: 4 },
  ]);
  const { decodeBatch } = admitPd({
    predictedTtftS: 1,
    decode: { instanceId: "d0", forecast: pool },
  }, {
    ...options,
    mode: "committed",
  });
  assertEquals(decodeBatch, (30 + 10 + 6) / 2);
});

Deno.test("admitPd() refuses on the prefill side's TTFT first, and admits everything when disabled", () => {
  const decode = { instanceId: "d0", forecast: { runningNow: 0, joiningInS: [], meanDecodeS: 4 } };
  const slow = admitPd({ predictedTtftS: 30, decode }, { ...options, mode: "early" });
  assert(!slow.verdict.admit);
  assertEquals(slow.verdict.reason, "ttft_slo");
  const off = admitPd({ predictedTtftS: 30, decode }, {
    ...options,
    enabled: false,
    mode: "early",
  });
  assert(off.verdict.admit);
});

Deno.test("poolForecast() sums the instances' requests and forecasts their mean per instance", () => {
  const pool = poolForecast([
    { runningNow: 30, joiningInS: [1], meanDecodeS: 8 },
    { runningNow: 10, joiningInS: [3, 20], meanDecodeS: 8 },
  ]);
  assertEquals(pool, { runningNow: 40, joiningInS: [1, 3, 20], meanDecodeS: 8, instances: 2 });
  assertEquals(forecastDecodeLoad(pool, 0), 20);
  assertEquals(forecastDecodeLoad(pool, 4), (40 * (1 - 4 / 8) + 2) / 2);
});

Deno.test("admitPd() on the pool: one full instance beside idle ones admits, a full pool refuses", () => {
  const judge = (loads: number[]) =>
    admitPd({
      predictedTtftS: 1,
      decode: {
        instanceId: "d0",
        forecast: poolForecast(
          loads.map((runningNow) => ({ runningNow, joiningInS: [], meanDecodeS: 4 })),
        ),
      },
    }, { ...options, mode: "early" });
  const mixed = judge([60, 0, 0]);
  assert(mixed.verdict.admit, JSON.stringify(mixed.verdict));
  assertEquals(mixed.decodeBatch, 20);
  // The request adds its share of one to the pool's mean: (40 + 40 + 39) / 3 + 1/3 is 40
  // requests, exactly 50 ms (a whole request more would break it); 40 each breaks it.
  assertEquals(mixed.predictedTbtS, decodeStepS(decodeModel, 20 + 1 / 3));
  assert(judge([40, 40, 39]).verdict.admit);
  const full = judge([40, 40, 40]);
  assert(!full.verdict.admit);
  assertEquals(full.verdict.reason, "tbt_slo");
});

Deno.test("admitPd() predicted on the pool: the pool's joiners and leavers, spread over its instances", () => {
  const pool = poolForecast([
    { runningNow: 60, joiningInS: [], meanDecodeS: 4 },
    { runningNow: 60, joiningInS: Array.from({ length: 30 }, () => 0.5), meanDecodeS: 4 },
  ]);
  const { verdict, decodeBatch } = admitPd(
    { predictedTtftS: 2, decode: { instanceId: "d0", forecast: pool } },
    { ...options, mode: "predicted" },
  );
  // Half the running leave in 2 s of a 4 s decode, and all 30 joiners have joined: (60 + 30) / 2.
  assertEquals(decodeBatch, 45);
  assert(!verdict.admit);
});

Deno.test("admitPd() judges no decode side for an empty pool", () => {
  const { verdict, decodeBatch, predictedTbtS } = admitPd(
    { predictedTtftS: 1, decode: { instanceId: "d0", forecast: poolForecast([]) } },
    { ...options, mode: "early" },
  );
  assert(verdict.admit);
  assertEquals([decodeBatch, predictedTbtS], [undefined, undefined]);
});

// The simulator's decode model: 30 ms + 0.5 ms per request + 40 ms per million KV tokens, guessing
// 4,000 tokens per request; at that guess a 50 ms TBT SLO holds 20 requests.
const kvModel = { baseS: 0.03, perRequestS: 0.0005, perKvTokenS: 4e-8, kvTokensPerRequest: 4000 };
const kvOptions = { enabled: true, tbtSloS: 0.05, decodeModel: kvModel, mode: "early" } as const;

Deno.test("admitPd() with the engines' own KV: a long-context batch refuses what the guess admits", () => {
  const forecast = { runningNow: 12, joiningInS: [], meanDecodeS: 10 };
  const guessed = admitPd({ decode: { instanceId: "d0", forecast } }, kvOptions);
  assert(guessed.verdict.admit, "13 requests of 4,000 tokens step in 39.0 ms");
  const reported = admitPd({
    decode: { instanceId: "d0", forecast: { ...forecast, kvTokensPerRequest: 30_000 } },
    promptTokens: 30_000,
  }, kvOptions);
  assert(!reported.verdict.admit);
  assertEquals(reported.verdict.reason, "tbt_slo");
  // 13 requests holding 30,000 tokens each: 30 + 6.5 + 15.6 ms.
  assertEquals(reported.predictedTbtS, decodeStepS(kvModel, 13, 13 * 30_000));
  assertEquals(reported.predictedTbtS!.toFixed(4), "0.0521");
});

Deno.test("admitPd() with the engines' own KV: the request's own prompt counts apart from the batch's mean", () => {
  const forecast = { runningNow: 10, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 2000 };
  const short = admitPd({ decode: { instanceId: "d0", forecast }, promptTokens: 1000 }, kvOptions);
  const long = admitPd(
    { decode: { instanceId: "d0", forecast }, promptTokens: 500_000 },
    kvOptions,
  );
  assertEquals(short.predictedTbtS, decodeStepS(kvModel, 11, 10 * 2000 + 1000));
  assert(short.verdict.admit);
  assertEquals(long.predictedTbtS, decodeStepS(kvModel, 11, 10 * 2000 + 500_000));
  assert(!long.verdict.admit, "a 500k-token prompt alone adds 20 ms to every step");
});

Deno.test("admitPd() without KV figures predicts as the model's guess does", () => {
  const forecast = { runningNow: 19, joiningInS: [], meanDecodeS: 10 };
  const { predictedTbtS } = admitPd({ decode: { instanceId: "d0", forecast } }, kvOptions);
  assertEquals(predictedTbtS, decodeStepS(kvModel, 20));
});

Deno.test("admitPd() refuses past the engines' batch cap even when the step would fit", () => {
  const forecast = { runningNow: 8, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 100 };
  const options = { ...kvOptions, maxDecodeBatch: 8 };
  const { verdict, predictedTbtS } = admitPd({ decode: { instanceId: "d0", forecast } }, options);
  assert(predictedTbtS! < 0.05, "the step alone fits the SLO");
  assert(!verdict.admit);
  assertEquals(verdict.reason, "tbt_slo");
  assert(verdict.message.includes("past its batch of 8"), verdict.message);
  const roomy = admitPd({
    decode: { instanceId: "d0", forecast: { ...forecast, runningNow: 7 } },
  }, options);
  assert(roomy.verdict.admit, "the eighth request has its place");
});

Deno.test("poolForecast() weighs each instance's KV per request by its running requests", () => {
  const pool = poolForecast([
    { runningNow: 3, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 1000 },
    { runningNow: 1, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 9000 },
  ]);
  assertEquals(pool.kvTokensPerRequest, (3 * 1000 + 9000) / 4);
  const unknown = poolForecast([
    { runningNow: 3, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 1000 },
    { runningNow: 1, joiningInS: [], meanDecodeS: 10 },
  ]);
  assertEquals(unknown.kvTokensPerRequest, undefined, "one instance unknown: the guess for all");
  const oneIdle = poolForecast([
    { runningNow: 3, joiningInS: [], meanDecodeS: 10, kvTokensPerRequest: 1000 },
    { runningNow: 0, joiningInS: [], meanDecodeS: 10 },
  ]);
  assertEquals(
    oneIdle.kvTokensPerRequest,
    1000,
    "an idle instance, reporting none, weighs nothing",
  );
  const idle = poolForecast([
    { runningNow: 0, joiningInS: [], meanDecodeS: 10 },
    { runningNow: 0, joiningInS: [], meanDecodeS: 10 },
  ]);
  assertEquals(idle.kvTokensPerRequest, undefined, "no batch to average: the guess");
});

Deno.test("admitPd() with the request's prompt but no KV term in the model predicts as without it", () => {
  const forecast = { runningNow: 19, joiningInS: [], meanDecodeS: 10 };
  const options = { ...kvOptions, decodeModel: DEFAULT_DECODE_MODEL };
  const plain = admitPd({ decode: { instanceId: "d0", forecast } }, options);
  for (const kvTokensPerRequest of [undefined, 50_000]) {
    const withKv = admitPd({
      decode: { instanceId: "d0", forecast: { ...forecast, kvTokensPerRequest } },
      promptTokens: 100_000,
    }, options);
    assertEquals(withKv.predictedTbtS, plain.predictedTbtS);
  }
});
