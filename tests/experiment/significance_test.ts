import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import {
  binomialCdf,
  normalCdf,
  normalTwoSidedP,
  regularizedBeta,
  studentTCdf,
  studentTQuantile,
} from "../../src/experiment/distributions.ts";
import {
  mannWhitneyGroups,
  mannWhitneyU,
  Moments,
  welchT,
  welchTSamples,
} from "../../src/experiment/significance.ts";

// Reference values from scipy 1.17 (stats.t, stats.norm, stats.binom, stats.beta).

Deno.test("distribution functions match scipy's values", () => {
  assertAlmostEquals(regularizedBeta(0.3, 2.5, 4), 0.3521975859067672, 1e-10);
  assertAlmostEquals(studentTCdf(-2, 5), 0.050969739414929174, 1e-10);
  assertAlmostEquals(studentTQuantile(0.975, 9), 2.262157162798205, 1e-8);
  assertAlmostEquals(studentTQuantile(0.975, 3.5), 2.9400886379827282, 1e-8);
  assertAlmostEquals(normalCdf(-1.96), 0.024997895148220435, 1e-7);
  assertAlmostEquals(normalTwoSidedP(4) / 2 / 3.167124183311986e-05, 1, 1e-6);
  assertAlmostEquals(binomialCdf(45, 100, 0.5), 0.18410080866334808, 1e-10);
  assertAlmostEquals(binomialCdf(3, 50, 0.1), 0.250293905953308, 1e-10);
  assertEquals(binomialCdf(-1, 10, 0.5), 0);
  assertEquals(binomialCdf(10, 10, 0.5), 1);
});

Deno.test("welchT() reproduces the textbook example (t = -2.46, df = 25.0, p = 0.021)", () => {
  // Wikipedia's "Welch's t-test" example 1; scipy ttest_ind(equal_var=False) agrees.
  const a1 = [
    27.5,
    21.0,
    19.0,
    23.6,
    17.0,
    17.9,
    16.9,
    20.1,
    21.9,
    22.6,
    23.1,
    19.6,
    19.0,
    21.7,
    21.4,
  ];
  const a2 = [
    27.1,
    22.0,
    20.8,
    23.4,
    23.4,
    23.5,
    25.8,
    22.0,
    24.8,
    20.2,
    21.9,
    22.1,
    22.9,
    20.5,
    24.4,
  ];
  const result = welchTSamples(a1, a2);
  assertAlmostEquals(result.t, -2.455356398286006, 1e-9);
  assertAlmostEquals(result.df, 24.988529290231416, 1e-8);
  assertAlmostEquals(result.p, 0.021378001462866992, 1e-9);
});

Deno.test("welchT() needs two values per sample and handles zero variance", () => {
  assert(
    Number.isNaN(
      welchT({ count: 1, mean: 1, variance: NaN }, { count: 5, mean: 2, variance: 1 }).p,
    ),
  );
  assertEquals(welchT({ count: 3, mean: 1, variance: 0 }, { count: 3, mean: 1, variance: 0 }).p, 1);
  assertEquals(welchT({ count: 3, mean: 1, variance: 0 }, { count: 3, mean: 2, variance: 0 }).p, 0);
});

Deno.test("mannWhitneyU() matches scipy's asymptotic p without ties", () => {
  const result = mannWhitneyU([19, 22, 16, 29, 24], [20, 11, 17, 12]);
  assertEquals(result.u, 17);
  assertAlmostEquals(result.p, 0.11134688653314041, 1e-6);
  assertAlmostEquals(result.probabilitySecondSmaller, 17 / 20, 1e-12);
});

Deno.test("mannWhitneyU() applies the tie correction like scipy", () => {
  const result = mannWhitneyU([1, 2, 2, 3, 3, 3, 4, 5, 8, 9], [2, 3, 4, 4, 5, 6, 6, 7, 7, 10, 11]);
  assertEquals(result.u, 31);
  assertAlmostEquals(result.p, 0.09566965528487799, 1e-6);
});

Deno.test("mannWhitneyGroups() over tie groups equals the raw-sample test", () => {
  const groups = [{ a: 1, b: 0 }, { a: 2, b: 1 }, { a: 3, b: 1 }, { a: 1, b: 2 }, { a: 1, b: 1 }];
  const a = [1, 2, 2, 3, 3, 3, 4, 5], b = [2, 3, 4, 4, 5];
  const fromGroups = mannWhitneyGroups(groups), fromSamples = mannWhitneyU(a, b);
  assertEquals(fromGroups.u, fromSamples.u);
  assertAlmostEquals(fromGroups.p, fromSamples.p, 1e-12);
});

Deno.test("mannWhitneyU() gives p = 1 for identical samples and NaN for an empty one", () => {
  assertEquals(mannWhitneyU([1, 2, 3], [1, 2, 3]).p, 1);
  assert(Number.isNaN(mannWhitneyU([], [1, 2]).p));
});

Deno.test("Moments keeps a stable mean and sample variance", () => {
  const m = new Moments();
  for (const v of [1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16]) m.add(v);
  assertAlmostEquals(m.mean, 1e9 + 10, 1e-6);
  assertAlmostEquals(m.variance, 30, 1e-6);
});
