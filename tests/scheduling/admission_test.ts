import { assert, assertEquals } from "../assert.ts";
import { admit, admitByLoad } from "../../src/scheduling/admission.ts";
import {
  decodeStepS,
  DEFAULT_DECODE_MODEL,
  predictTbtS,
} from "../../src/scheduling/decode_model.ts";

const slo = { enabled: true, ttftSloS: 30, tbtSloS: 0.1 };

Deno.test("admit() lets every request through when admission is off", () => {
  assertEquals(admit({ predictedTtftS: 999, predictedTbtS: 9 }, { ...slo, enabled: false }), {
    admit: true,
  });
});

Deno.test("admit() accepts a request predicted to meet both SLOs", () => {
  assertEquals(admit({ predictedTtftS: 29.9, predictedTbtS: 0.09 }, slo), { admit: true });
});

Deno.test("admit() answers 429 when even the best instance breaks the TTFT SLO, retrying after the excess", () => {
  const verdict = admit({ predictedTtftS: 41.2, instanceId: "prefill-3" }, slo);
  assert(!verdict.admit);
  assertEquals(verdict.status, 429);
  assertEquals(verdict.reason, "ttft_slo");
  assertEquals(verdict.retryAfterS, 12);
  assert(
    verdict.message.includes("41.2 s") && verdict.message.includes("prefill-3"),
    verdict.message,
  );
  assert(verdict.message.includes("SLO of 30"), verdict.message);
});

Deno.test("admit() bounds Retry-After between its minimum and maximum", () => {
  const barely = admit({ predictedTtftS: 30.01 }, slo);
  const hopeless = admit({ predictedTtftS: 900 }, slo);
  assert(!barely.admit && !hopeless.admit);
  assertEquals(barely.retryAfterS, 1);
  assertEquals(hopeless.retryAfterS, 60);
});

Deno.test("admit() rejects when the decode side would break the TBT SLO", () => {
  const verdict = admit({ predictedTtftS: 1, predictedTbtS: 0.2 }, slo);
  assert(!verdict.admit);
  assertEquals(verdict.reason, "tbt_slo");
  assert(verdict.message.includes("TBT SLO"), verdict.message);
});

Deno.test("admit() checks nothing it has no prediction or SLO for", () => {
  assertEquals(admit({}, slo), { admit: true });
  assertEquals(admit({ predictedTtftS: 100 }, { enabled: true }), { admit: true });
});

Deno.test("admitByLoad() refuses only when the least loaded instance is at the threshold", () => {
  const options = { enabled: true, maxWaitingPrefillTokens: 100_000 };
  assertEquals(admitByLoad(99_999, options), { admit: true });
  const verdict = admitByLoad(100_000, options);
  assert(!verdict.admit);
  assertEquals(verdict.reason, "load_threshold");
});

Deno.test("predictTbtS() prices the least busy decode instance with the new request added", () => {
  assertEquals(predictTbtS(DEFAULT_DECODE_MODEL, [10, 3, 7]), decodeStepS(DEFAULT_DECODE_MODEL, 4));
  assertEquals(predictTbtS(DEFAULT_DECODE_MODEL, []), undefined);
  assert(decodeStepS(DEFAULT_DECODE_MODEL, 200) > decodeStepS(DEFAULT_DECODE_MODEL, 20));
});
