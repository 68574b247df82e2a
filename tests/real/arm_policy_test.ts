import { assertEquals, assertThrows } from "../assert.ts";
import { armPolicy } from "./policy_comparison_bench.ts";

Deno.test("bench:policies arms name a policy, or a policy with numeric parameters", () => {
  assertEquals(armPolicy("round_robin"), "round_robin");
  assertEquals(armPolicy("affinity_ttft:homeWeight=0"), {
    name: "affinity_ttft",
    params: { homeWeight: 0 },
  });
  assertEquals(armPolicy("affinity_ttft:homeWeight=2&duplicationWeight=16"), {
    name: "affinity_ttft",
    params: { homeWeight: 2, duplicationWeight: 16 },
  });
  assertThrows(() => armPolicy("affinity_ttft:homeWeight"), Error, "is not key=number");
  assertThrows(() => armPolicy("affinity_ttft:homeWeight=x"), Error, "is not key=number");
});
