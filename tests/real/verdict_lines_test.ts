import { assert, assertEquals, assertMatch } from "../assert.ts";
import {
  type PolicyResult,
  pooledVerdictLines,
  type Sample,
  verdictLines,
} from "./policy_comparison_bench.ts";

/** An arm whose requests over 40 documents all took `ttftMs` (a tenth slower on even ones). */
function arm(policy: string, ttftMs: number): PolicyResult {
  const samples: Sample[] = Array.from({ length: 400 }, (_, index) => ({
    index,
    doc: index % 40,
    status: 200,
    ttftMs: ttftMs * (index % 2 === 0 ? 1.1 : 1),
    ttftFromEvent: false,
    promptTokens: 2000,
    cachedTokens: 1900,
    routerPromptTokens: 2000,
    routerHitTokens: 1900,
    instance: "v0",
  }));
  return { policy, samples, wallS: 1, agreement: [], storeKeys: 0, servedPerEngine: [400, 0] };
}

Deno.test("bench:policies' verdict compares the first arm with every other arm", () => {
  const lines = verdictLines([
    arm("affinity_ttft:duplicationWeight=1", 100),
    arm("smg:cache_aware", 200),
    arm("round_robin", 100),
  ]);
  assertEquals(lines.length, 2);
  assertMatch(
    lines[0],
    /^arm affinity_ttft:duplicationWeight=1 is 50% faster than smg:cache_aware/,
  );
  assert(lines[1].includes("round_robin") && lines[1].includes("not significant"), lines[1]);
});

Deno.test("bench:policies gives no verdict for a run of one arm", () => {
  assertEquals(verdictLines([arm("affinity_ttft", 100)]), ["(one arm in this run: no verdict)"]);
});

Deno.test("bench:policies pools an arm's places in the run when it is listed more than once", () => {
  const lines = pooledVerdictLines([
    arm("affinity_ttft", 100),
    arm("smg:cache_aware", 200),
    arm("affinity_ttft", 120),
    arm("smg:cache_aware", 150),
  ]);
  assertEquals(lines.length, 1);
  assertMatch(lines[0], /^arm affinity_ttft is \d+% faster than smg:cache_aware/);
  assertMatch(lines[0], /n=800 vs 800/);
  assertEquals(pooledVerdictLines([arm("a", 100), arm("b", 100)]), [], "nothing repeated");
});
