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
