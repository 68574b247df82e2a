import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import {
  fitPrefillModel,
  MOONCAKE_PREFILL_MODEL,
  PrefillModelEstimator,
  type PrefillSample,
  prefillTimeS,
} from "../../src/scheduling/prefill_model.ts";
import { seededRandom } from "../../src/sim/rng.ts";

function near(actual: number, expected: number, tolerance: number) {
  assert(
    Math.abs(actual - expected) <= tolerance,
    `expected ${expected} ± ${tolerance}, got ${actual}`,
  );
}

Deno.test("prefillTimeS() gives 27.5 s for 128k uncached tokens (docs/compat.md §8)", () => {
  near(prefillTimeS(MOONCAKE_PREFILL_MODEL, 128_000, 0), 27.5, 0.05);
});

Deno.test("prefillTimeS() gives 2.3 s for 128k tokens with 95% cached (docs/compat.md §8)", () => {
  near(prefillTimeS(MOONCAKE_PREFILL_MODEL, 6_400, 121_600), 2.3, 0.02);
});

Deno.test("prefillTimeS() charges the cached context: new tokens after a long prefix cost more", () => {
  const fresh = prefillTimeS(MOONCAKE_PREFILL_MODEL, 4_000, 0);
  const afterPrefix = prefillTimeS(MOONCAKE_PREFILL_MODEL, 4_000, 60_000);
  assert(afterPrefix > fresh * 1.5, `${afterPrefix} should exceed ${fresh} clearly`);
  assert(afterPrefix < prefillTimeS(MOONCAKE_PREFILL_MODEL, 64_000, 0));
});

Deno.test("prefillTimeS() of a prompt split into chunks adds up to the whole prompt's attention cost", () => {
  const model = { linear: 0.1157, quadratic: 0.000775 };
  let total = 0;
  for (let done = 0; done < 40_000; done += 8_000) {
    total += prefillTimeS(model, 8_000, 10_000 + done);
  }
  assertAlmostEquals(total, prefillTimeS(model, 40_000, 10_000), 1e-9);
});

function noisySamples(
  count: number,
  scale: number,
  overheadS: number,
  seed: number,
): PrefillSample[] {
  const random = seededRandom(seed);
  const samples: PrefillSample[] = [];
  for (let i = 0; i < count; i++) {
    const newTokens = 500 + Math.floor(random() * 30_000);
    const cachedTokens = random() < 0.5 ? 0 : Math.floor(random() * 40_000);
    let seconds = scale * prefillTimeS(MOONCAKE_PREFILL_MODEL, newTokens, cachedTokens) + overheadS;
    seconds *= 1 + 0.2 * (random() - 0.5); // ±10% measurement noise
    if (i % 10 === 3) seconds *= 6; // a stalled request now and then
    samples.push({ newTokens, cachedTokens, seconds });
  }
  return samples;
}

Deno.test("fitPrefillModel() recovers a slower instance's scale and overhead despite noise and outliers", () => {
  const fit = fitPrefillModel(MOONCAKE_PREFILL_MODEL, noisySamples(64, 1.5, 0.2, 7));
  near(fit.scale, 1.5, 0.08);
  near(fit.constantS, 0.2, 0.15);
  near(fit.model.quadratic, MOONCAKE_PREFILL_MODEL.quadratic * fit.scale, 1e-12);
});

Deno.test("fitPrefillModel() is deterministic: the same samples give the same model", () => {
  const samples = noisySamples(40, 0.8, 0, 3);
  assertEquals(
    fitPrefillModel(MOONCAKE_PREFILL_MODEL, samples),
    fitPrefillModel(MOONCAKE_PREFILL_MODEL, samples),
  );
});

Deno.test("fitPrefillModel() keeps the prior until it has enough samples", () => {
  const fit = fitPrefillModel(MOONCAKE_PREFILL_MODEL, noisySamples(5, 3, 0, 1));
  assertEquals(fit.scale, 1);
  assertEquals(fit.model.linear, MOONCAKE_PREFILL_MODEL.linear);
});

Deno.test("fitPrefillModel() clamps absurd measurements to the configured scale bounds", () => {
  const samples = noisySamples(30, 50, 0, 2);
  assertEquals(fitPrefillModel(MOONCAKE_PREFILL_MODEL, samples, { maxScale: 4 }).scale, 4);
  const fast = noisySamples(30, 0.01, 0, 2);
  assertEquals(fitPrefillModel(MOONCAKE_PREFILL_MODEL, fast, { minScale: 0.25 }).scale, 0.25);
});

Deno.test("PrefillModelEstimator keeps a bounded window and follows the instance's recent speed", () => {
  const estimator = new PrefillModelEstimator(MOONCAKE_PREFILL_MODEL, { window: 32 });
  for (const sample of noisySamples(100, 1, 0, 11)) estimator.observe(sample);
  near(estimator.fit().scale, 1, 0.08);
  for (const sample of noisySamples(40, 2, 0, 12)) estimator.observe(sample);
  assertEquals(estimator.sampleCount, 32);
  near(estimator.fit().scale, 2, 0.15);
});

Deno.test("PrefillModelEstimator ignores measurements that are not finite", () => {
  const estimator = new PrefillModelEstimator(MOONCAKE_PREFILL_MODEL);
  estimator.observe({ newTokens: 1000, cachedTokens: 0, seconds: NaN });
  estimator.observe({ newTokens: 1000, cachedTokens: 0, seconds: -1 });
  assertEquals(estimator.sampleCount, 0);
});
