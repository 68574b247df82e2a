import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { DEFAULT_DECODE_MODEL } from "../../src/scheduling/decode_model.ts";
import { MOONCAKE_PREFILL_MODEL } from "../../src/scheduling/prefill_model.ts";
import { resolveTtftParams } from "../../src/scheduling/registry.ts";
import { queueReport } from "../../src/sim/queue_report.ts";
import { type PolicyRun, type SimConfig, simulate } from "../../src/sim/simulator.ts";
import { parseMooncakeTrace, type TraceRequest } from "../../src/sim/trace.ts";

const CONVERSATIONS = parseMooncakeTrace(
  await Deno.readTextFile(new URL("../data/conversation_trace.jsonl", import.meta.url)),
  { limit: 400 },
);

function config(overrides: Partial<SimConfig> = {}): SimConfig {
  return {
    instances: 1,
    cacheBlocks: 6000,
    chunkTokens: 8192,
    blockTokens: 512,
    speed: 1,
    seed: 1,
    sloTtftS: 6.5,
    sloTbtS: 0.1,
    kvPool: "planned",
    ttft: resolveTtftParams(),
    engineModel: MOONCAKE_PREFILL_MODEL,
    heterogeneity: 0,
    refine: false,
    decodeInstances: 0,
    decodeModel: DEFAULT_DECODE_MODEL,
    loadThresholdTokens: 60_000,
    timelinePoints: 10,
    ...overrides,
  };
}

const run = (admission: PolicyRun["admission"], policy = "mooncake_ttft"): PolicyRun => ({
  label: `${policy}:${admission}`,
  policy,
  admission,
});

/** Requests of `tokens` at `atMs`, nothing shared between them. */
function requests(...specs: { atMs: number; tokens: number }[]): TraceRequest[] {
  let next = 0;
  return specs.map(({ atMs, tokens }) => ({
    timestampMs: atMs,
    inputLength: tokens,
    outputLength: 1,
    hashIds: Array.from({ length: Math.ceil(tokens / 512) }, () => next++),
  }));
}

// One instance: a 40k-token prefill (about 5.9 s) fits a 6.5 s SLO, nothing fits behind it.
const BIG_THEN_SMALL = requests({ atMs: 0, tokens: 40_000 }, { atMs: 100, tokens: 8_000 });

Deno.test("queue: a request ttft admission refuses waits and is served once the prefill ahead ends", () => {
  const refused = simulate(BIG_THEN_SMALL, config(), run("ttft"));
  assertEquals(refused.rejectedByReason, { ttft_slo: 1 });
  assert(Number.isNaN(refused.ttftS[1]));

  const queued = simulate(BIG_THEN_SMALL, config(), run("queue"));
  assertEquals(queued.rejectedByReason, {});
  const bigDoneS = queued.ttftS[0];
  // It waited exactly until the big prefill's first token, then was planned and sent.
  assertAlmostEquals(queued.queueWaitS[1], bigDoneS - 0.1, 1e-9);
  assert(queued.ttftS[1] > queued.queueWaitS[1], "the client's TTFT includes the wait");
  assert(Number.isNaN(queued.queueWaitS[0]), "the first request never waited");
});

Deno.test("queue: a request still waiting at its TTL is refused (429) and waited exactly the TTL", () => {
  const result = simulate(
    BIG_THEN_SMALL,
    config({ queue: { ttlS: 1, maxRequests: 256, maxPromptTokens: 2_000_000 } }),
    run("queue"),
  );
  assertEquals(result.rejectedByReason, { queue_expired: 1 });
  assertEquals(result.instance[1], -1);
  assert(Number.isNaN(result.ttftS[1]));
  assertEquals(result.queueWaitS[1], 1);
  const report = queueReport(result, 6.5);
  assertEquals([report.expired, report.rejected, report.served], [1, 1, 1]);
});

Deno.test("queue: a full queue refuses at once", () => {
  const three = requests({ atMs: 0, tokens: 40_000 }, { atMs: 100, tokens: 8_000 }, {
    atMs: 200,
    tokens: 8_000,
  });
  const result = simulate(
    three,
    config({ queue: { ttlS: 30, maxRequests: 1, maxPromptTokens: 2_000_000 } }),
    run("queue"),
  );
  assertEquals(result.rejectedByReason, { queue_full: 1 });
  assert(Number.isNaN(result.queueWaitS[2]), "refused without waiting");
});

Deno.test("queue: the more urgent band goes first, whatever the arrival order", () => {
  const trace = requests(
    { atMs: 0, tokens: 40_000 },
    { atMs: 100, tokens: 30_000 }, // batch (band 1), arrives first
    { atMs: 200, tokens: 30_000 }, // interactive (band 0)
  );
  const bands = { shares: [0.2, 0.8], tenants: 1, priorities: [1, 1, 0] };
  const result = simulate(trace, config({ bands, sloTtftS: 60 / 1.0 }), run("queue"));
  // With a 60 s SLO nothing is refused: nobody waits, first come first served.
  assertEquals(Array.from(result.queueWaitS).filter((w) => !Number.isNaN(w)), []);

  const tight = simulate(trace, config({ bands }), run("queue"));
  assertEquals(tight.rejectedByReason, {});
  const firstTokenS = (i: number) => [0, 0.1, 0.2][i] + tight.ttftS[i];
  assert(firstTokenS(2) < firstTokenS(1), "band 0 is served before the earlier band 1");
  assert(tight.queueWaitS[2] < tight.queueWaitS[1]);
  assertEquals(tight.band[2], 0);
});

Deno.test("queue: a newcomer that would fit does not overtake a waiting request of its band", () => {
  const trace = requests(
    { atMs: 0, tokens: 40_000 },
    { atMs: 100, tokens: 30_000 }, // refused: waits
    { atMs: 5_000, tokens: 1_000 }, // would fit the SLO alone (predicted ≈ 1 s + the 40k's rest)
  );
  const bands = { shares: [1], tenants: 1, priorities: [0, 0, 0] };
  const ttft = simulate(trace, config({ bands }), run("ttft"));
  assert(!Number.isNaN(ttft.ttftS[2]), "ttft admission takes the small newcomer at once");
  const queued = simulate(trace, config({ bands }), run("queue"));
  assert(queued.queueWaitS[2] > 0, "the newcomer queues behind the waiting request");
  const firstTokenS = (i: number) => [0, 0.1, 5][i] + queued.ttftS[i];
  // Planned after it, on the same instance: its first token comes no sooner (here, the same chunk).
  assert(firstTokenS(1) <= firstTokenS(2), "the waiting request goes first");
  assert(queued.ttftS[2] > ttft.ttftS[2], "waiting cost the newcomer time");
});

Deno.test("queue: on the conversation trace past capacity no wait exceeds the TTL, in any band", () => {
  const ttlS = 5;
  const result = simulate(
    CONVERSATIONS,
    config({
      instances: 4,
      speed: 3,
      sloTtftS: 10,
      queue: { ttlS, maxRequests: 256, maxPromptTokens: 2_000_000 },
    }),
    run("queue"),
  );
  const report = queueReport(result, 10);
  assert(report.queued > 0 && report.expired > 0, "the run is past capacity");
  for (const band of report.bands) assert(band.maxWaitS <= ttlS, `band ${band.band}`);
  for (let i = 0; i < result.ttftS.length; i++) {
    if (result.instance[i] < 0 && !Number.isNaN(result.queueWaitS[i])) {
      assertEquals(result.queueWaitS[i], ttlS, "an expired request waited its TTL");
    }
  }
  assertEquals(report.rejected, report.requests - report.served);
  assertEquals(report.expired, result.rejectedByReason["queue_expired"]);
});

Deno.test("queue: off, ttft and load give the results they gave before the queue existed", () => {
  // Figures of the simulator at 2d6b64a, before the queue: 400 requests, 4 instances, speed 3.
  const before = {
    off: { rejected: {}, served: 400, ttftSum: 28156.182581736968, endS: 210.34383784323668 },
    ttft: { rejected: { ttft_slo: 107 }, served: 293, ttftSum: 2291.1097316689593 },
    load: { rejected: { load_threshold: 274 }, served: 126, ttftSum: 828.1118993422951 },
  };
  const settings = config({
    instances: 4,
    speed: 3,
    sloTtftS: 10,
    refine: true,
    timelinePoints: 50,
  });
  for (const admission of ["off", "ttft", "load"] as const) {
    const result = simulate(CONVERSATIONS, settings, run(admission));
    const served = Array.from(result.ttftS).filter((t) => !Number.isNaN(t));
    assertEquals(result.rejectedByReason, before[admission].rejected, admission);
    assertEquals(served.length, before[admission].served, admission);
    assertEquals(served.reduce((a, b) => a + b, 0), before[admission].ttftSum, admission);
  }
  assertEquals(simulate(CONVERSATIONS, settings, run("off")).endS, before.off.endS);
});

Deno.test("queue: when nothing is refused, queue and ttft replay identically", () => {
  const settings = config({ instances: 4, speed: 1, sloTtftS: 1_000, refine: true });
  const ttft = simulate(CONVERSATIONS, settings, run("ttft"));
  const queued = simulate(CONVERSATIONS, settings, run("queue"));
  assertEquals(Array.from(queued.ttftS), Array.from(ttft.ttftS));
  assertEquals(Array.from(queued.instance), Array.from(ttft.instance));
  assertEquals(queueReport(queued, 1_000).queued, 0);
});
