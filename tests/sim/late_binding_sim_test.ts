import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { type PolicyRun, type SimConfig, simulate } from "../../src/sim/simulator.ts";
import type { TraceRequest } from "../../src/sim/trace.ts";
import { conversationTrace, simTestConfig } from "./sim_test_config.ts";

const CONVERSATIONS = await conversationTrace(400);

function config(overrides: Partial<SimConfig> = {}): SimConfig {
  return simTestConfig({
    instances: 2,
    kvPool: "off",
    refine: false,
    loadThresholdTokens: 60_000,
    timelinePoints: 10,
    ...overrides,
  });
}

const run = (holdAboveTokens?: number): PolicyRun => ({
  label: "affinity_ttft",
  policy: "affinity_ttft",
  admission: "off",
  holdAboveTokens,
});

/** A request at `atMs` of the given blocks (512 tokens each). */
const request = (atMs: number, blocks: number[]): TraceRequest => ({
  timestampMs: atMs,
  inputLength: blocks.length * 512,
  outputLength: 1,
  hashIds: blocks,
});
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

Deno.test("late binding: with a bound no queue reaches, every figure is as without it", () => {
  const free = simulate(CONVERSATIONS, config({ instances: 8, speed: 2 }), run());
  const bound = simulate(CONVERSATIONS, config({ instances: 8, speed: 2 }), run(1e12));
  assertEquals(bound.heldRequests, 0);
  assertEquals([...bound.ttftS], [...free.ttftS]);
  assertEquals([...bound.instance], [...free.instance]);
});

Deno.test("late binding: a burst is held at the router, sent first come first served, all served", () => {
  const burst = range(0, 6).map((i) => request(0, range(i * 100, 40)));
  const result = simulate(burst, config(), run(0));
  // The first two find an idle instance each; the other four wait for one to have room.
  assertEquals(result.heldRequests, 4);
  assert(result.ttftS.every((t) => Number.isFinite(t)), "every request served");
  for (let i = 3; i < 6; i++) {
    assert(result.ttftS[i] >= result.ttftS[i - 1], `FIFO at ${i}`);
    assert(result.heldS[i] >= result.heldS[i - 1], `released in order at ${i}`);
  }
  // Each held one left the router when an earlier one's prefill ended, its first token.
  const firstTokensS = [...result.ttftS];
  for (let i = 2; i < 6; i++) {
    assert(firstTokensS.some((t) => Math.abs(t - result.heldS[i]) < 1e-9), `released at ${i}`);
  }
  assertEquals(simulate(burst, config(), run()).heldRequests, 0);
});

Deno.test("late binding: a request held while its document is prefilled goes where it then lies", () => {
  // Document A on one instance, document B on the other, both busy for seconds; a second request
  // for A arrives meanwhile and is held until an instance has room, then placed on A's holder.
  const trace = [
    request(0, range(0, 40)),
    request(0, range(1000, 40)),
    request(500, [...range(0, 40), 5000]),
  ];
  const held = simulate(trace, config(), run(0));
  assertEquals(held.heldRequests, 1);
  assertEquals(held.instance[2], held.instance[0], "placed where its document was prefilled");
  assert(held.reusedTokens[2] >= 40 * 512 - 512, "and reuses it");
  // Released at the first prefill's end (its arrival was 0.5 s in).
  assertAlmostEquals(held.heldS[2] + 0.5, Math.min(held.ttftS[0], held.ttftS[1]), 1e-9);
});

Deno.test("late binding: free where a batch costs the sum of its prompts, dear where each engine step has a cost of its own", () => {
  // Twelve new 512-token prompts a millisecond apart on one engine.
  const burst = range(0, 12).map((i) => request(i, [1_000 + i]));
  const meanTtft = (engineStepS: number, hold?: number) => {
    const result = simulate(burst, config({ instances: 1, engineStepS }), run(hold));
    return result.ttftS.reduce((a, b) => a + b, 0) / burst.length;
  };
  // Without a step cost one by one finishes most of them sooner than one batch of eleven does.
  assert(meanTtft(0, 0) < 0.7 * meanTtft(0));
  // With 100 ms a step (a CPU engine's overhead), one by one pays it twelve times, batched twice.
  assert(meanTtft(0.1, 0) > 1.1 * meanTtft(0.1));
});
