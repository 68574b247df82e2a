import { assert, assertEquals } from "../assert.ts";
import { DecodeOutlook } from "../../src/cluster/decode_outlook.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { type DecodePlanContext, planDecode } from "../../src/gateway/pd_plan.ts";

/** A disaggregated model's plan context, its decode load judged as `decodeLoad`. */
function context(decodeLoad: "instance" | "pool"): DecodePlanContext {
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "none" },
      slo: { ttftS: 10, tbtS: 0.05, admission: true },
      disaggregation: { protocol: "sglang", earlyRejection: "early", decodeLoad },
      instances: [
        { id: "p0", url: "http://p0:30000", role: "prefill" },
        { id: "d0", url: "http://d0:30000", role: "decode" },
      ],
    }],
  }).models[0];
  return { config, decodeOutlook: new DecodeOutlook({ meanDecodeS: 10, now: () => 0 }) };
}

Deno.test("planDecode() on the pool: an instance that cannot take the request does not lower the pool's load", () => {
  // d0 is idle but its KV cache is full; d1, the only one that can take the request, runs 45
  // (30 ms + 0.5 ms per request: over 50 ms). Counted in, d0 would halve the mean to 22.5.
  const candidates = [
    { id: "d0", healthy: true, runningRequests: 0, kvUsage: 0.99 },
    { id: "d1", healthy: true, runningRequests: 45, kvUsage: 0.2 },
    { id: "d2", healthy: false, runningRequests: 0, kvUsage: 0 },
  ];
  const pool = planDecode(context("pool"), candidates, { prefillId: "p0", predictedTtftS: 1 });
  assertEquals(pool.decode.decision.ranking, ["d1"]);
  assertEquals([pool.decode.judgedBatch, pool.decode.judgedLoad], [45, "pool"]);
  assert(!pool.admission.admit);
  assertEquals(pool.admission.reason, "tbt_slo");
});

Deno.test("planDecode() judges the chosen instance or the pool's mean, as configured", () => {
  const candidates = [
    { id: "d0", healthy: true, runningRequests: 60, kvUsage: 0.1 },
    { id: "d1", healthy: true, runningRequests: 21, kvUsage: 0.1 },
  ];
  const instance = planDecode(context("instance"), candidates, {
    prefillId: "p0",
    predictedTtftS: 1,
  });
  assertEquals([instance.decode.judgedBatch, instance.decode.judgedLoad], [21, "instance"]);
  assert(instance.admission.admit);
  const pool = planDecode(context("pool"), candidates, { prefillId: "p0", predictedTtftS: 1 });
  assertEquals([pool.decode.judgedBatch, pool.decode.judgedLoad], [40.5, "pool"]);
  assert(!pool.admission.admit);
});
