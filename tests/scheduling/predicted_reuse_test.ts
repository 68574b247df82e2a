import { assertEquals } from "../assert.ts";
import {
  predictedReuseTokens,
  reportsReuse,
  type ReusePlan,
} from "../../src/scheduling/predicted_reuse.ts";

const plan = (poolUse?: ReusePlan["inputs"]["poolUse"]): ReusePlan => ({
  candidates: [{ id: "a", localPrefixTokens: 512 }, { id: "b", localPrefixTokens: 0 }],
  poolPrefixTokens: 1024,
  inputs: poolUse ? { poolUse } : {},
});

Deno.test("predictedReuseTokens: an engine reuses its own prefix unless it loads the pool's itself", () => {
  assertEquals(predictedReuseTokens(plan(), "a"), 512);
  assertEquals(predictedReuseTokens(plan(), "b"), 0);
  assertEquals(predictedReuseTokens(plan("never"), "b"), 0);
  assertEquals(predictedReuseTokens(plan("always"), "a"), 1024);
  assertEquals(predictedReuseTokens(plan("always"), "b"), 1024);
});

Deno.test("predictedReuseTokens: a longer own prefix stays, and an unranked instance reuses nothing", () => {
  const longer = { ...plan("always"), poolPrefixTokens: 256 };
  assertEquals(predictedReuseTokens(longer, "a"), 512);
  assertEquals(predictedReuseTokens(longer, "b"), 256);
  assertEquals(predictedReuseTokens(plan("always"), "decode-0"), 0);
});

Deno.test("predictedReuseTokens: a decode instance that prefills a request itself reuses the prefix it holds", () => {
  const local = {
    ...plan(),
    decode: { candidates: [{ id: "d0", prefixTokens: 384 }, { id: "d1" }] },
  };
  assertEquals(predictedReuseTokens(local, "d0"), 384);
  assertEquals(predictedReuseTokens(local, "d1"), 0);
  assertEquals(predictedReuseTokens({ ...local, inputs: { poolUse: "always" } }, "d0"), 1024);
});

Deno.test("reportsReuse: only a vLLM Mooncake pair's decode reports something other than hits", () => {
  const pair = { prefillInstanceId: "p0" };
  assertEquals(reportsReuse({}, {}), true);
  assertEquals(reportsReuse({ decode: { protocol: "vllm-nixl" } }, pair), true);
  assertEquals(reportsReuse({ decode: { protocol: "sglang" } }, pair), true);
  assertEquals(reportsReuse({ decode: { protocol: "vllm-mooncake" } }, pair), false);
  assertEquals(reportsReuse({ decode: { protocol: "vllm-mooncake" } }, {}), true, "local prefill");
});
