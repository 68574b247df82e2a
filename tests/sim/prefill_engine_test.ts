import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { MOONCAKE_PREFILL_MODEL, prefillTimeS } from "../../src/scheduling/prefill_model.ts";
import { BlockCache } from "../../src/sim/block_cache.ts";
import { newPrefillJob, SimPrefillEngine } from "../../src/sim/prefill_engine.ts";

const options = {
  model: MOONCAKE_PREFILL_MODEL,
  slowdown: 1,
  chunkTokens: 2048,
  blockTokens: 512,
  kvBytesPerToken: 327_680,
  transferBytesPerS: 85e9,
};

function runToIdle(engine: SimPrefillEngine) {
  let now = 0;
  const finished: { id: number; at: number }[] = [];
  for (
    let duration = engine.startIteration(now);
    duration !== undefined;
    duration = engine.startIteration(now)
  ) {
    now += duration;
    for (const job of engine.finishIteration()) finished.push({ id: job.requestIndex, at: now });
  }
  return finished;
}

Deno.test("SimPrefillEngine's chunked prefill costs exactly the model's time for the whole prompt", () => {
  const engine = new SimPrefillEngine("p0", new BlockCache(100), options, () => 0);
  engine.enqueue(newPrefillJob(0, 5000, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], false));
  const [done] = runToIdle(engine);
  assertAlmostEquals(done.at, prefillTimeS(MOONCAKE_PREFILL_MODEL, 5000, 0), 1e-9);
});

Deno.test("SimPrefillEngine serves requests first come, first served across chunks", () => {
  const engine = new SimPrefillEngine("p0", new BlockCache(100), options, () => 0);
  engine.enqueue(newPrefillJob(0, 3000, [1, 2, 3, 4, 5, 6], false));
  engine.enqueue(newPrefillJob(1, 600, [7, 8], false));
  const finished = runToIdle(engine);
  assertEquals(finished.map((f) => f.id), [0, 1]);
  const expected = prefillTimeS(MOONCAKE_PREFILL_MODEL, 3000, 0) +
    prefillTimeS(MOONCAKE_PREFILL_MODEL, 600, 0);
  assertAlmostEquals(finished[1].at, expected, 1e-9);
});

Deno.test("SimPrefillEngine reuses its cached prefix and writes the prompt's blocks", () => {
  const cache = new BlockCache(100);
  [1, 2].forEach((b) => cache.insert(b));
  const engine = new SimPrefillEngine("p0", cache, options, () => 0);
  const job = newPrefillJob(0, 1500, [1, 2, 3], false);
  engine.enqueue(job);
  const [done] = runToIdle(engine);
  assertEquals(job.cachedTokens, 1024);
  assertEquals(job.newTokens, 476);
  assertAlmostEquals(done.at, prefillTimeS(MOONCAKE_PREFILL_MODEL, 476, 1024), 1e-9);
  assert(cache.has(3));
});

Deno.test("SimPrefillEngine loads a pool prefix only when told to, paying the transfer", () => {
  const withPool = new SimPrefillEngine("p0", new BlockCache(100), options, () => 2);
  const job = newPrefillJob(0, 1500, [1, 2, 3], true);
  withPool.enqueue(job);
  const [done] = runToIdle(withPool);
  assertEquals(job.transferTokens, 1024);
  const transferS = 1024 * 327_680 / 85e9;
  assertAlmostEquals(done.at, transferS + prefillTimeS(MOONCAKE_PREFILL_MODEL, 476, 1024), 1e-9);
  const localOnly = new SimPrefillEngine("p1", new BlockCache(100), options, () => 2);
  const other = newPrefillJob(1, 1500, [1, 2, 3], false);
  localOnly.enqueue(other);
  runToIdle(localOnly);
  assertEquals(other.transferTokens, 0);
  assertEquals(other.newTokens, 1500);
});

Deno.test("a step cost is paid once per iteration, however many prompts it batches", () => {
  const stepS = 0.05;
  const batched = new SimPrefillEngine("p0", new BlockCache(100), { ...options, stepS }, () => 0);
  const jobs = [0, 1, 2, 3].map((i) => newPrefillJob(i, 256, [100 + i], false));
  for (const job of jobs) batched.enqueue(job);
  const together = runToIdle(batched); // 1,024 tokens: one 2,048-token iteration
  const alone = new SimPrefillEngine("p1", new BlockCache(100), { ...options, stepS }, () => 0);
  alone.enqueue(newPrefillJob(0, 256, [200], false));
  const one = runToIdle(alone);
  const compute = prefillTimeS(MOONCAKE_PREFILL_MODEL, 256, 0);
  assertAlmostEquals(one[0].at, stepS + compute, 1e-9);
  assertEquals(new Set(together.map((f) => f.at)).size, 1, "one iteration");
  assertAlmostEquals(together[0].at, stepS + 4 * compute, 1e-9);
  // What the router learns a prefill took includes the step each job waited through.
  for (const job of jobs) assertAlmostEquals(job.computeS, stepS + compute, 1e-9);
});
