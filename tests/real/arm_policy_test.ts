import { assertEquals, assertThrows } from "../assert.ts";
import { armPolicy, armSettings, smgArm } from "./policy_comparison_bench.ts";

Deno.test("bench:policies arms name a policy, or a policy with parameters as the config takes it", () => {
  // The spec's syntax is tested in tests/scheduling/policy_spec_test.ts; here, the config's shape.
  assertEquals(armPolicy("round_robin"), "round_robin");
  assertEquals(armPolicy("affinity_ttft:homeWeight=0"), {
    name: "affinity_ttft",
    params: { homeWeight: 0 },
  });
  assertThrows(() => armPolicy("affinity_ttft:homeWeight"), Error, "is not key=number");
});

Deno.test("bench:policies arms may set the router's workers and listener after @", () => {
  assertEquals(armSettings("affinity_ttft"), { policy: "affinity_ttft" });
  assertEquals(armSettings("affinity_ttft@workers=0"), { policy: "affinity_ttft", workers: 0 });
  assertEquals(armSettings("ref:cache_aware:homeWeight=1@workers=2"), {
    policy: "ref:cache_aware:homeWeight=1",
    workers: 2,
  });
  assertEquals(armSettings("round_robin@server=deno@workers=1"), {
    policy: "round_robin",
    server: "deno",
    workers: 1,
  });
  assertEquals(armSettings("affinity_ttft@hold=0"), {
    policy: "affinity_ttft",
    holdAboveTokens: 0,
  });
  assertEquals(armSettings("affinity_ttft@events@hold=0"), {
    policy: "affinity_ttft",
    events: true,
    holdAboveTokens: 0,
  });
  assertThrows(() => armSettings("affinity_ttft@threads=1"), Error, "is not workers=N");
  assertEquals(armSettings("affinity_ttft@poolloads"), {
    policy: "affinity_ttft",
    poolLoads: true,
  });
  assertEquals(armSettings("affinity_ttft@nopoolloads"), {
    policy: "affinity_ttft",
    poolLoads: false,
  });
  assertEquals(
    armSettings("affinity_ttft@events").poolLoads,
    undefined,
    "the key format's default",
  );
  assertThrows(() => armSettings("affinity_ttft@event"), Error, "poolloads or nopoolloads");
  assertThrows(() => armSettings("affinity_ttft@hold=-1"), Error, "poolloads or nopoolloads");
  assertThrows(() => armSettings("affinity_ttft@server=bun"), Error, "is not workers=N");
});

Deno.test("bench:policies smg arms may add flags to SMG's launch after @", () => {
  assertEquals(smgArm("smg:round_robin"), { policy: "round_robin", flags: [] });
  assertEquals(smgArm("smg:cache_aware@max-tree-size=400000@eviction-interval-secs=1"), {
    policy: "cache_aware",
    flags: ["--max-tree-size", "400000", "--eviction-interval-secs", "1"],
  });
  assertThrows(() => smgArm("smg:cache_aware@--x=1"), Error, "is not flag=value");
  assertThrows(() => smgArm("smg:cache_aware@max-tree-size"), Error, "is not flag=value");
});
