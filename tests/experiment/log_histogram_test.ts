import { assert, assertEquals } from "../assert.ts";
import { LogHistogram, quantileCiRanks } from "../../src/experiment/log_histogram.ts";
import { seededRandom } from "../../src/sim/rng.ts";

Deno.test("quantileCiRanks() gives the order-statistic ranks scipy's binomial gives", () => {
  // l = max{l : F(l-1) <= 2.5 %}, u = min{u : F(u-1) >= 97.5 %}, F = Binomial(n, q) CDF.
  assertEquals(quantileCiRanks(100, 0.5), [40, 61]);
  assertEquals(quantileCiRanks(100, 0.9), [84, 96]);
  assertEquals(quantileCiRanks(1000, 0.99), [983, 997]);
  assertEquals(quantileCiRanks(20, 0.5), [6, 15]);
  // p99 of 50 values has no upper bound: rank 51 does not exist.
  assertEquals(quantileCiRanks(50, 0.99), [48, 51]);
});

Deno.test("LogHistogram quantiles stay within half a bucket (0.5 %) of the exact values", () => {
  const random = seededRandom(7);
  const values = Array.from({ length: 5000 }, () => Math.exp(3 * random() - 1));
  const histogram = new LogHistogram();
  for (const v of values) histogram.add(v);
  const sorted = [...values].sort((a, b) => a - b);
  for (const q of [0.01, 0.5, 0.9, 0.99]) {
    const exact = sorted[Math.ceil(q * sorted.length) - 1];
    const estimate = histogram.quantile(q)!;
    assert(Math.abs(estimate / exact - 1) <= 0.0051, `q=${q}: ${estimate} vs ${exact}`);
  }
  assertEquals(histogram.count, 5000);
  assert(histogram.buckets().length < 400, `${histogram.buckets().length} buckets`);
});

Deno.test("LogHistogram memory is bounded by the spread of values, not their number", () => {
  const histogram = new LogHistogram();
  const random = seededRandom(3);
  for (let i = 0; i < 200_000; i++) histogram.add(0.001 + random() * 999.999);
  // 1 ms .. 1000 s with 1 % buckets: ln(1e6) / ln(1.01) ≈ 1389 buckets at most.
  assert(histogram.buckets().length <= 1389, String(histogram.buckets().length));
});

Deno.test("LogHistogram quantile intervals cover the true median about 95 % of the time", () => {
  // Exponential(1): median ln 2. 400 experiments of 60 values each.
  const random = seededRandom(11);
  let covered = 0;
  const trials = 400;
  for (let t = 0; t < trials; t++) {
    const histogram = new LogHistogram();
    for (let i = 0; i < 60; i++) histogram.add(-Math.log(1 - random()));
    const [lo, hi] = histogram.quantileCi(0.5);
    if (lo! <= Math.LN2 * 1.005 && hi! >= Math.LN2 / 1.005) covered++;
  }
  const rate = covered / trials;
  assert(rate >= 0.92 && rate <= 0.995, `coverage ${rate}`);
});

Deno.test("LogHistogram answers undefined where there is no value or no bound", () => {
  const histogram = new LogHistogram();
  assertEquals(histogram.quantile(0.5), undefined);
  for (let i = 1; i <= 10; i++) histogram.add(i);
  assertEquals(histogram.valueAtRank(0), undefined);
  assertEquals(histogram.valueAtRank(11), undefined);
  assertEquals(histogram.quantileCi(0.99)[1], undefined);
});
