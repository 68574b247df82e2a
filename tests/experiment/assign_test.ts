import { assert, assertEquals } from "../assert.ts";
import { assignArm, stickyArm, weightedArm } from "../../src/experiment/assign.ts";
import { CLUSTERS } from "../../src/experiment/clustered.ts";
import { seededRandom } from "../../src/sim/rng.ts";

const AB = [{ name: "A", weight: 1 }, { name: "B", weight: 1 }];
const options = { salt: "", fallback: "random" as const, random: seededRandom(1) };

/** Pearson's chi-square statistic of observed counts against expected shares. */
function chiSquare(counts: number[], shares: number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  return counts.reduce((sum, c, i) => sum + (c - total * shares[i]) ** 2 / (total * shares[i]), 0);
}

Deno.test("stickyArm() gives a key the same arm every time", () => {
  for (let i = 0; i < 200; i++) {
    const key = `session-${i}`;
    const first = stickyArm(AB, key, "");
    for (let r = 0; r < 3; r++) assertEquals(stickyArm(AB, key, ""), first);
  }
});

Deno.test("stickyArm() splits keys in proportion to the weights (chi-square, 2 df, p > 0.001)", () => {
  const arms = [{ name: "A", weight: 1 }, { name: "B", weight: 2 }, { name: "C", weight: 1 }];
  const counts = [0, 0, 0];
  for (let i = 0; i < 20_000; i++) counts[stickyArm(arms, `user-${i}`, "salt")]++;
  // The 0.999 quantile of chi-square with 2 degrees of freedom is 13.8.
  const statistic = chiSquare(counts, [0.25, 0.5, 0.25]);
  assert(statistic < 13.8, `chi-square ${statistic.toFixed(1)} for ${counts}`);
});

Deno.test("stickyArm() reshuffles keys when the salt changes", () => {
  let moved = 0;
  for (let i = 0; i < 2000; i++) {
    if (stickyArm(AB, `k${i}`, "one") !== stickyArm(AB, `k${i}`, "two")) moved++;
  }
  // Independent splits: about half the keys change arm.
  assert(moved > 850 && moved < 1150, String(moved));
});

Deno.test("stickyArm() moves no key between existing arms when an arm is added", () => {
  const three = [...AB, { name: "C", weight: 1 }];
  let toC = 0;
  for (let i = 0; i < 3000; i++) {
    const before = stickyArm(AB, `k${i}`, "");
    const after = stickyArm(three, `k${i}`, "");
    if (after === 2) toC++;
    else assertEquals(after, before, `key k${i} moved from ${before} to ${after}`);
  }
  assert(toC > 850 && toC < 1150, String(toC));
});

Deno.test("stickyArm() keeps long keys (chat openings) sticky and split", () => {
  const counts = [0, 0];
  for (let i = 0; i < 1000; i++) {
    const key = "chat:" + "system prompt ".repeat(50) + i;
    const arm = stickyArm(AB, key, "");
    assertEquals(stickyArm(AB, key, ""), arm);
    counts[arm]++;
  }
  assert(counts[0] > 400 && counts[1] > 400, String(counts));
});

Deno.test("weightedArm() maps the unit interval onto cumulative weights", () => {
  const arms = [{ name: "A", weight: 1 }, { name: "B", weight: 3 }];
  assertEquals(weightedArm(arms, 0), 0);
  assertEquals(weightedArm(arms, 0.2499), 0);
  assertEquals(weightedArm(arms, 0.25), 1);
  assertEquals(weightedArm(arms, 0.9999), 1);
});

Deno.test("assignArm() falls back to a random arm, or the control arm, without a key", () => {
  const counts = [0, 0];
  for (let i = 0; i < 1000; i++) {
    const { index, kind } = assignArm(AB, undefined, options);
    assertEquals(kind, "fallback");
    counts[index]++;
  }
  assert(counts[0] > 400 && counts[1] > 400, String(counts));
  const control = assignArm(AB, undefined, { ...options, fallback: "control" });
  assertEquals([control.index, control.kind], [0, "fallback"]);
});

Deno.test("assignArm() tells sticky, random-by-design and fallback assignments apart", () => {
  assertEquals(assignArm(AB, "abc", options).kind, "sticky");
  assertEquals(assignArm(AB, null, options).kind, "random");
  assertEquals(assignArm(AB, undefined, options).kind, "fallback");
});

Deno.test("assignArm() puts a key's requests in one statistics bucket and spreads keys over all", () => {
  const buckets = new Set<number>();
  for (let i = 0; i < 2000; i++) {
    const first = assignArm(AB, `k${i}`, options).cluster;
    assertEquals(assignArm(AB, `k${i}`, options).cluster, first);
    assert(first >= 0 && first < CLUSTERS);
    buckets.add(first);
  }
  assertEquals(buckets.size, CLUSTERS);
});
