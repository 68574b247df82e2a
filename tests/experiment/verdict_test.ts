import { assert, assertEquals, assertMatch } from "../assert.ts";
import { ExperimentTally } from "../../src/experiment/experiment_report.ts";
import type { ArmComparison, ArmReport } from "../../src/experiment/arm_stats.ts";
import { pValue, verdictLine } from "../../src/experiment/verdict.ts";
import { seededRandom } from "../../src/sim/rng.ts";

function arm(name: string, p90: number, extra: Partial<ArmReport> = {}): ArmReport {
  return {
    name,
    policy: "p",
    weight: 1,
    requests: 0,
    served: 0,
    ttft: {
      n: 0,
      mean: 1,
      meanCi: [null, null],
      p50: 1,
      p50Ci: [null, null],
      p90,
      p90Ci: [null, null],
      p99: 1,
      p99Ci: [null, null],
    },
    hitRatio: null,
    engineHitRatio: null,
    rejected: 0,
    errors: 0,
    aborted: 0,
    unkeyed: 0,
    overridden: 0,
    ...extra,
  };
}

function comparison(
  p90: { ratio: number; p: number } | null,
  options: Partial<ArmComparison> = {},
): ArmComparison {
  return {
    arm: "B",
    control: "A",
    n: { arm: 4210, control: 4190 },
    meanChange: -0.18,
    p50Change: -0.1,
    p90Change: p90 ? p90.ratio - 1 : null,
    p99Change: -0.3,
    p90Test: p90,
    geometricMean: { ratio: 0.82, p: 0.0004 },
    mannWhitney: { u: 0, z: 0, p: 0.001, probabilitySecondSmaller: 0.6 },
    welchLogTtft: { t: null, df: null, p: null, ratio: null },
    significant: p90 !== null && p90.p < 0.05,
    ...options,
  };
}

Deno.test("verdictLine() states the winner at p90 with p and n, then the geometric mean", () => {
  assertEquals(
    verdictLine(comparison({ ratio: 0.77, p: 0.003 }), arm("B", 1.2), arm("A", 1.56)),
    "arm B is 23% faster than A at p90 (1.20 s vs 1.56 s), p=0.003, n=4,210 vs 4,190; " +
      "geometric mean 18% faster (p<0.001, significant)",
  );
});

Deno.test("verdictLine() says 'not significant' plainly when the p90 difference has p >= 0.05", () => {
  const line = verdictLine(
    comparison({ ratio: 0.96, p: 0.41 }, { geometricMean: { ratio: 1.02, p: 0.66 } }),
    arm("B", 1.2),
    arm("A", 1.25),
  );
  assertEquals(
    line,
    "arm B vs A: not significant at p90 (4% faster, p=0.41, n=4,210 vs 4,190); " +
      "geometric mean 2% slower (p=0.66)",
  );
  assertMatch(
    verdictLine(comparison({ ratio: 1, p: 0.05 }), arm("B", 1), arm("A", 1)),
    /not significant at p90 \(about the same, p=0\.050/,
  );
});

Deno.test("verdictLine() reports a slower arm as slower", () => {
  const line = verdictLine(
    comparison({ ratio: 1.4, p: 0.0004 }, { geometricMean: { ratio: 1.2, p: 0.02 } }),
    arm("B", 0.7),
    arm("A", 0.5),
  );
  assertEquals(
    line,
    "arm B is 40% slower than A at p90 (700 ms vs 500 ms), p<0.001, n=4,210 vs 4,190; " +
      "geometric mean 20% slower (p=0.020, significant)",
  );
});

Deno.test("verdictLine() says how many times slower past 100%", () => {
  const line = verdictLine(
    comparison({ ratio: 2.7, p: 1e-9 }, { geometricMean: { ratio: 2.82, p: 1e-20 } }),
    arm("B", 7.8),
    arm("A", 2.89),
  );
  assertEquals(
    line,
    "arm B is 2.7× slower than A at p90 (7.80 s vs 2.89 s), p<0.001, n=4,210 vs 4,190; " +
      "geometric mean 2.8× slower (p<0.001, significant)",
  );
});

Deno.test("verdictLine() asks for more data below 30 TTFTs per arm and lists 429s and errors", () => {
  const line = verdictLine(
    comparison({ ratio: 0.5, p: 0.001 }, { n: { arm: 12, control: 40 } }),
    arm("B", 1, { rejected: 3, errors: 1 }),
    arm("A", 1),
  );
  assertEquals(
    line,
    "arm B vs A: not enough data yet (n=12 vs 40; at least 30 TTFTs per arm are needed); " +
      "429s 3 vs 0; errors 1 vs 0",
  );
});

Deno.test("pValue() prints small p-values as bounds and others with enough digits", () => {
  assertEquals(pValue(0.0000123), "p<0.001");
  assertEquals(pValue(0.0213), "p=0.021");
  assertEquals(pValue(0.41), "p=0.41");
  assertEquals(pValue(NaN), "p=n/a");
});

Deno.test("ExperimentTally finds a real 25% speed-up significant and a null one not", () => {
  const random = seededRandom(5);
  const lognormal = () => {
    const u = 1 - random(), v = random();
    return Math.exp(0.5 * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  };
  const arms = [
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "least_load", weight: 1 },
    { name: "C", policy: "random", weight: 1 },
  ];
  const tally = new ExperimentTally(arms);
  for (let i = 0; i < 1500; i++) {
    tally.record({ arm: "A", outcome: "served", ttftS: lognormal() });
    tally.record({ arm: "B", outcome: "served", ttftS: 0.75 * lognormal() });
    tally.record({ arm: "C", outcome: "served", ttftS: lognormal() });
  }
  const report = tally.report();
  const [b, c] = report.comparisons;
  assert(b.significant && b.p90Test!.p < 0.01, `B: p90 p=${b.p90Test!.p}`);
  assert(b.geometricMean!.p < 1e-6, `B: geometric mean p=${b.geometricMean!.p}`);
  assert(b.mannWhitney.p < 1e-6, `B: Mann-Whitney p=${b.mannWhitney.p}`);
  assert(b.meanChange! < -0.15 && b.meanChange! > -0.35, `B: ${b.meanChange}`);
  assert(b.welchLogTtft.ratio! > 0.7 && b.welchLogTtft.ratio! < 0.8, `${b.welchLogTtft.ratio}`);
  assertMatch(report.verdict[0], /^arm B is \d+% faster than A at p90/);
  assert(!c.significant, `C: p=${c.mannWhitney.p}`);
  assertMatch(report.verdict[1], /^arm C vs A: not significant at p90/);
});
