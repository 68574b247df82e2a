import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import {
  clusteredMean,
  ClusteredSample,
  CLUSTERS,
  logRatioTest,
  ratioVariance,
} from "../../src/experiment/clustered.ts";
import { studentTQuantile } from "../../src/experiment/distributions.ts";
import { ExperimentTally } from "../../src/experiment/experiment_report.ts";
import { Moments } from "../../src/experiment/significance.ts";
import { seededRandom } from "../../src/sim/rng.ts";

function gaussian(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

Deno.test("ratioVariance() with one value per cluster is the variance of a plain mean", () => {
  const values = [3, 1, 4, 1, 5, 9, 2, 6];
  const m = new Moments();
  for (const v of values) m.add(v);
  assertAlmostEquals(
    ratioVariance(values.map((y) => ({ y, n: 1 }))),
    m.variance / values.length,
    1e-12,
  );
  assert(Number.isNaN(ratioVariance([{ y: 1, n: 1 }])));
});

Deno.test("logRatioTest() compares two log estimates with a Welch-style t", () => {
  assertEquals(logRatioTest({ log: 0.3, se: 0.1, df: 30 }, { log: 0.3, se: 0.1, df: 30 }).p, 1);
  const result = logRatioTest({ log: 0.1, se: 0.05, df: 1e6 }, { log: 0, se: 0.05, df: 1e6 });
  assertAlmostEquals(result.ratio, Math.exp(0.1), 1e-12);
  assertAlmostEquals(result.p, 0.157299207, 1e-5); // two-sided normal p of z = √2
});

/** Sessions with a shared random effect on log-TTFT: requests of one session are correlated. */
function sessions(random: () => number, count: number, perSession: number, shift = 0) {
  const out: { cluster: number; ttft: number }[] = [];
  for (let s = 0; s < count; s++) {
    const cluster = Math.floor(random() * CLUSTERS);
    const effect = 0.6 * gaussian(random);
    for (let r = 0; r < perSession; r++) {
      out.push({ cluster, ttft: Math.exp(shift + effect + 0.3 * gaussian(random)) });
    }
  }
  return out;
}

Deno.test("the clustered mean interval covers ~95% with correlated sessions; a per-request one does not", () => {
  const random = seededRandom(17);
  let clusteredHits = 0, naiveHits = 0;
  const trials = 300;
  for (let t = 0; t < trials; t++) {
    const sample = new ClusteredSample();
    const log = new Moments();
    for (const { cluster, ttft } of sessions(random, 40, 10)) {
      sample.add(cluster, ttft);
      log.add(Math.log(ttft));
    }
    const m = clusteredMean(sample, "log", log.variance);
    const half = studentTQuantile(0.975, m.df) * Math.sqrt(m.variance);
    if (Math.abs(m.mean) <= half) clusteredHits++;
    if (Math.abs(log.mean) <= 1.96 * Math.sqrt(log.variance / log.count)) naiveHits++;
  }
  const clustered = clusteredHits / trials, naive = naiveHits / trials;
  assert(clustered >= 0.91 && clustered <= 0.99, `clustered coverage ${clustered}`);
  assert(naive < 0.8, `per-request coverage ${naive} should be far below 95%`);
});

Deno.test("A/A experiments with sticky sessions: clustered tests keep ~5% false positives", () => {
  // Measured (400 trials): p90 ~6-7%, geometric mean ~5%, per-request Mann-Whitney ~40%.
  const random = seededRandom(23);
  let p90 = 0, geometric = 0, mannWhitney = 0;
  const trials = 400;
  for (let t = 0; t < trials; t++) {
    const tally = new ExperimentTally([
      { name: "A", policy: "x", weight: 1 },
      { name: "B", policy: "x", weight: 1 },
    ]);
    for (const arm of ["A", "B"]) {
      for (const { cluster, ttft } of sessions(random, 30, 8)) {
        tally.record({ arm, outcome: "served", ttftS: ttft, cluster });
      }
    }
    const [c] = tally.report().comparisons;
    if (c.p90Test!.p < 0.05) p90++;
    if (c.geometricMean!.p < 0.05) geometric++;
    if (c.mannWhitney.p < 0.05) mannWhitney++;
  }
  assert(p90 / trials <= 0.1, `p90 false positives ${p90}/${trials}`);
  assert(geometric / trials <= 0.09, `geometric-mean false positives ${geometric}/${trials}`);
  assert(mannWhitney / trials >= 0.2, `per-request Mann-Whitney ${mannWhitney}/${trials}`);
});

Deno.test("clustered tests still find a real 30% shift between arms", () => {
  const random = seededRandom(29);
  const tally = new ExperimentTally([
    { name: "A", policy: "x", weight: 1 },
    { name: "B", policy: "y", weight: 1 },
  ]);
  for (const { cluster, ttft } of sessions(random, 300, 8)) {
    tally.record({ arm: "A", outcome: "served", ttftS: ttft, cluster });
  }
  for (const { cluster, ttft } of sessions(random, 300, 8, Math.log(0.7))) {
    tally.record({ arm: "B", outcome: "served", ttftS: ttft, cluster });
  }
  const [c] = tally.report().comparisons;
  assert(c.geometricMean!.p < 0.001, `geometric mean p=${c.geometricMean!.p}`);
  assert(c.p90Test!.p < 0.05, `p90 p=${c.p90Test!.p}`);
  assert(
    c.geometricMean!.ratio > 0.6 && c.geometricMean!.ratio < 0.8,
    String(c.geometricMean!.ratio),
  );
});
