import { assert, assertEquals } from "../assert.ts";
import { decodeStepS, DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { selectDecode } from "../../src/scheduling/decode_policy.ts";

const model = DEFAULT_DECODE_MODEL;

Deno.test("selectDecode() picks the decode instance with the fewest running requests and predicts its TBT", () => {
  const decision = selectDecode([
    { id: "d0", healthy: true, runningRequests: 40 },
    { id: "d1", healthy: true, runningRequests: 12 },
    { id: "d2", healthy: true, runningRequests: 25 },
  ], { model });
  assertEquals(decision.ranking, ["d1", "d2", "d0"]);
  assertEquals(decision.predictedTbtS, decodeStepS(model, 13));
  assertEquals(decision.scores.find((s) => s.id === "d0")!.terms.runningRequests, 40);
});

Deno.test("selectDecode() never ranks an unhealthy instance or one whose KV cache is full, and says why", () => {
  const decision = selectDecode([
    { id: "d0", healthy: false, runningRequests: 0 },
    { id: "d1", healthy: true, runningRequests: 1, kvUsage: 0.99 },
    { id: "d2", healthy: true, runningRequests: 30, kvUsage: 0.5 },
  ], { model });
  assertEquals(decision.ranking, ["d2"]);
  const excluded = Object.fromEntries(decision.scores.map((s) => [s.id, s.excluded]));
  assertEquals(excluded, { d0: "unhealthy", d1: "KV cache 99% full", d2: undefined });
});

Deno.test("selectDecode() with kv_headroom prefers free KV cache, ties broken by running requests", () => {
  const decision = selectDecode([
    { id: "d0", healthy: true, runningRequests: 5, kvUsage: 0.7 },
    { id: "d1", healthy: true, runningRequests: 9, kvUsage: 0.2 },
    { id: "d2", healthy: true, runningRequests: 3, kvUsage: 0.2 },
  ], { model, policy: "kv_headroom" });
  assertEquals(decision.ranking, ["d2", "d1", "d0"]);
});

Deno.test("selectDecode() with no choosable instance ranks nothing and predicts nothing", () => {
  const decision = selectDecode([{ id: "d0", healthy: false, runningRequests: 0 }], { model });
  assertEquals([decision.ranking, decision.predictedTbtS], [[], undefined]);
  assert(decision.scores.length === 1);
});
