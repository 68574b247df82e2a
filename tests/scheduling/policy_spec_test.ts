import { assertEquals, assertThrows } from "../assert.ts";
import { parsePolicySpec } from "../../src/scheduling/policy_spec.ts";

Deno.test("a policy spec is a name, or a name with numeric parameters after a colon", () => {
  assertEquals(parsePolicySpec("round_robin"), { name: "round_robin", params: {} });
  assertEquals(parsePolicySpec("affinity_ttft:duplicationWeight=1"), {
    name: "affinity_ttft",
    params: { duplicationWeight: 1 },
  });
  assertEquals(parsePolicySpec("affinity_ttft:homeWeight=0&duplicationWeight=2.5"), {
    name: "affinity_ttft",
    params: { homeWeight: 0, duplicationWeight: 2.5 },
  });
});

Deno.test("a policy spec's parameter that is not key=number is refused, naming it", () => {
  for (const bad of ["p:w", "p:w=", "p:=1", "p:w=x", "p:w=1=2", "p:w=1&", "p:w=Infinity"]) {
    const pair = bad.slice(2).split("&").find((p) => !/^\w+=[\d.]+$/.test(p));
    assertThrows(() => parsePolicySpec(bad), Error, `"${pair}" is not key=number`);
  }
});
