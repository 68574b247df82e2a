import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { experimentReportText, ExperimentTally } from "../../src/experiment/experiment_report.ts";
import { ArmTally, summarizeTtft, TtftStore } from "../../src/experiment/arm_stats.ts";

Deno.test("summarizeTtft() gives the t-interval of the mean", () => {
  const store = new TtftStore();
  // One value per cluster bucket: the clustered variance equals the independent one.
  [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].forEach((v, i) => store.add(v, i));
  const summary = summarizeTtft(store);
  assertEquals(summary.n, 10);
  assertAlmostEquals(summary.mean!, 5.5, 1e-12);
  // 5.5 ± t(0.975, 9) · s/√10 with s² = 55/6 (ten buckets: 9 degrees of freedom).
  const half = 2.262157162798205 * Math.sqrt(55 / 6 / 10);
  assertAlmostEquals(summary.meanCi[0]!, 5.5 - half, 1e-8);
  assertAlmostEquals(summary.meanCi[1]!, 5.5 + half, 1e-8);
  assert(Math.abs(summary.p50! / 5 - 1) < 0.006, String(summary.p50));
  assertEquals(summary.p99Ci[1], null);
});

Deno.test("ArmTally counts outcomes and keeps overridden requests out of the statistics", () => {
  const tally = new ArmTally();
  tally.record({ arm: "A", outcome: "served", ttftS: 0.5, promptTokens: 1000, hitTokens: 600 });
  tally.record({
    arm: "A",
    outcome: "served",
    ttftS: 0.7,
    assignment: "fallback",
    promptTokens: 1000,
    hitTokens: 0,
    engineCachedTokens: 512,
    enginePromptTokens: 1000,
  });
  tally.record({ arm: "A", outcome: "rejected" });
  tally.record({ arm: "A", outcome: "error" });
  tally.record({ arm: "A", outcome: "aborted" });
  tally.record({ arm: "A", outcome: "served", ttftS: 99, assignment: "override" });
  assertEquals(
    [tally.requests, tally.served, tally.rejected, tally.errors, tally.aborted],
    [6, 2, 1, 1, 1],
  );
  assertEquals([tally.unkeyed, tally.overridden, tally.ttft.count], [1, 1, 2]);
  assertAlmostEquals(tally.hitTokens / tally.promptTokens, 0.3, 1e-12);
  assertAlmostEquals(tally.engineCachedTokens / tally.enginePromptTokens, 0.512, 1e-12);
});

Deno.test("ExperimentTally reports every arm, compares each with the first, and prints text", () => {
  const tally = new ExperimentTally([
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "least_load", weight: 3 },
  ]);
  for (let i = 1; i <= 40; i++) {
    tally.record({ arm: "A", outcome: "served", ttftS: i / 10 });
    tally.record({ arm: "B", outcome: "served", ttftS: i / 10 + 0.01 });
  }
  tally.record({ arm: "Z", outcome: "served", ttftS: 1 });
  const report = tally.report();
  assertEquals(report.control, "A");
  assertEquals(report.arms.map((a) => [a.name, a.weight, a.requests]), [["A", 1, 40], [
    "B",
    3,
    40,
  ]]);
  assertEquals(report.comparisons.length, 1);
  assertEquals(report.comparisons[0].n, { arm: 40, control: 40 });
  assertEquals(tally.unknownArm, 1);
  assertEquals(report.verdict.length, 1);
  const text = experimentReportText(report, "Title");
  assert(text.includes("B vs A, session-clustered: p90 ratio"), text);
  assert(text.includes("per request: Mann-Whitney U="), text);
  assert(text.includes("Verdict:\n  arm B vs A: not significant at p90"), text);
  // JSON-safe: no NaN or Infinity sneaks into the admin API's answer.
  const empty = new ExperimentTally([{ name: "A", policy: "x", weight: 1 }, {
    name: "B",
    policy: "y",
    weight: 1,
  }]).report();
  assertEquals(JSON.parse(JSON.stringify(empty)).arms[0].ttft.mean, null);
});
