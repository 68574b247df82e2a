import { assert, assertAlmostEquals, assertEquals } from "../assert.ts";
import { queueReport } from "../../src/sim/queue_report.ts";
import { type PolicyRun, type SimConfig, simulate } from "../../src/sim/simulator.ts";
import { DEFAULT_SIM_QUEUE } from "../../src/sim/sim_queue.ts";
import type { QueueAdmitWhen } from "../../src/scheduling/queue_rules.ts";
import type { TraceRequest } from "../../src/sim/trace.ts";
import { conversationTrace, simTestConfig } from "./sim_test_config.ts";

const CONVERSATIONS = await conversationTrace(400);

function config(overrides: Partial<SimConfig> = {}): SimConfig {
  return simTestConfig({
    instances: 1,
    sloTtftS: 6.5,
    refine: false,
    loadThresholdTokens: 60_000,
    timelinePoints: 10,
    ...overrides,
  });
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

// One instance, a 6.5 s SLO: a 40k-token prefill takes 5.87 s, an 8k one 0.98 s. An 8k request at
// 4 s is predicted 5.87 + 0.98 s (the 40k prefill's whole lease counts until its first token):
// refused; once the 40k prefill is done it would wait 1.87 s + 0.98 s, within the SLO.
const BIG = { atMs: 0, tokens: 40_000 };
const BIG_THEN_SMALL = requests(BIG, { atMs: 4_000, tokens: 8_000 });

Deno.test("queue: a request ttft admission refuses waits and is served within the SLO once the prefill ahead ends", () => {
  const refused = simulate(BIG_THEN_SMALL, config(), run("ttft"));
  assertEquals(refused.rejectedByReason, { ttft_slo: 1 });
  assert(Number.isNaN(refused.ttftS[1]));

  const queued = simulate(BIG_THEN_SMALL, config(), run("queue"));
  assertEquals(queued.rejectedByReason, {});
  const bigDoneS = queued.ttftS[0];
  // It waited exactly until the big prefill's first token, then was planned and sent.
  assertAlmostEquals(queued.queueWaitS[1], bigDoneS - 4, 1e-9);
  assert(queued.ttftS[1] > queued.queueWaitS[1], "the client's TTFT includes the wait");
  assert(queued.ttftS[1] <= 6.5, "within the SLO: goodput the 429 would have lost");
  assert(Number.isNaN(queued.queueWaitS[0]), "the first request never waited");
});

Deno.test("queue: a request still waiting at its TTL is refused (429) and waited exactly the TTL", () => {
  const result = simulate(
    BIG_THEN_SMALL,
    config({ queue: { ...DEFAULT_SIM_QUEUE, ttlS: 1 } }),
    run("queue"),
  );
  assertEquals(result.rejectedByReason, { queue_timeout: 1 });
  assertEquals(result.instance[1], -1);
  assert(Number.isNaN(result.ttftS[1]));
  assertEquals(result.queueWaitS[1], 1);
  const report = queueReport(result, 6.5);
  assertEquals([report.expired, report.rejected, report.served], [1, 1, 1]);
});

Deno.test("queue: a request that can no longer meet the SLO counting its wait leaves when its wait used the SLO", () => {
  // At 0.1 s the 8k request would wait 5.77 s and then take 0.98 s: past 6.5 s, never admitted.
  const early = requests(BIG, { atMs: 100, tokens: 8_000 });
  const result = simulate(early, config(), run("queue"));
  assertEquals(result.rejectedByReason, { queue_timeout: 1 });
  assertAlmostEquals(result.queueWaitS[1], 6.5, 1e-9);
});

Deno.test("queue: a request not even an idle instance could serve within the SLO is refused at once", () => {
  // 60k tokens: 9.7 s of prefill alone, past the 6.5 s SLO.
  const result = simulate(requests(BIG, { atMs: 100, tokens: 60_000 }), config(), run("queue"));
  assertEquals(result.rejectedByReason, { ttft_slo: 1 });
  assert(Number.isNaN(result.queueWaitS[1]), "refused without waiting");
});

Deno.test("queue: a full queue refuses at once", () => {
  const three = requests(BIG, { atMs: 4_000, tokens: 8_000 }, { atMs: 4_100, tokens: 8_000 });
  const result = simulate(
    three,
    config({ queue: { ...DEFAULT_SIM_QUEUE, maxRequests: 1 } }),
    run("queue"),
  );
  assertEquals(result.rejectedByReason, { queue_full: 1 });
  assert(Number.isNaN(result.queueWaitS[2]), "refused without waiting");
});

Deno.test("queue: the more urgent band goes first, whatever the arrival order", () => {
  const trace = requests(
    BIG,
    { atMs: 4_000, tokens: 8_000 }, // batch (band 1), arrives first
    { atMs: 4_100, tokens: 8_000 }, // interactive (band 0)
  );
  const bands = { shares: [0.2, 0.8], tenants: 1, priorities: [1, 1, 0] };
  const result = simulate(trace, config({ bands, sloTtftS: 60 }), run("queue"));
  // With a 60 s SLO nothing is refused: nobody waits, first come first served.
  assertEquals(Array.from(result.queueWaitS).filter((w) => !Number.isNaN(w)), []);

  const tight = simulate(trace, config({ bands }), run("queue"));
  assertEquals(tight.rejectedByReason, {});
  const firstTokenS = (i: number) => [0, 4, 4.1][i] + tight.ttftS[i];
  assert(firstTokenS(2) < firstTokenS(1), "band 0 is served before the earlier band 1");
  assertEquals(tight.band[2], 0);
});

Deno.test("queue: a newcomer that fits goes at once, even past a more urgent request that waits", () => {
  const trace = requests(
    BIG,
    { atMs: 100, tokens: 30_000 }, // refused (5.87 + 4.17 s): waits, band 0
    { atMs: 1_000, tokens: 1_000 }, // fits alone (5.87 + 0.12 s), band 1
  );
  const bands = { shares: [0.5, 0.5], tenants: 1, priorities: [0, 0, 1] };
  const result = simulate(trace, config({ bands }), run("queue"));
  assert(Number.isNaN(result.queueWaitS[2]), "not held back by the waiting request");
  assert(!Number.isNaN(result.ttftS[2]));
  assert(!Number.isNaN(result.queueWaitS[1]), "the refused one waited");
});

Deno.test("queue: a waiting request that does not fit holds back none behind it that does", () => {
  const trace = requests(
    BIG,
    { atMs: 100, tokens: 30_000 }, // waits; at 5.87 s it would still take 4.17 s: past the SLO
    { atMs: 4_000, tokens: 8_000 }, // waits; at 5.87 s: 1.87 + 0.98 s, it fits
  );
  const result = simulate(trace, config(), run("queue"));
  assert(!Number.isNaN(result.ttftS[2]), "served although queued behind one that does not fit");
  assertEquals(result.instance[1], -1);
  assertEquals(result.rejectedByReason, { queue_timeout: 1 });
});

Deno.test("queue: with admitWhen idle (and cause, for a TTFT refusal) a waiting request goes only once its instance has no prefill waiting", () => {
  const trace = requests(
    BIG,
    { atMs: 3_900, tokens: 8_000 }, // refused (5.87 + 0.98 s): waits
    { atMs: 4_000, tokens: 2_000 }, // fits as a newcomer: queued on the engine behind BIG
  );
  const withRule = (admitWhen: QueueAdmitWhen) =>
    simulate(trace, config({ queue: { ...DEFAULT_SIM_QUEUE, admitWhen } }), run("queue"));
  const [fits, idle] = [withRule("fits"), withRule("idle")];
  // Every refusal here is the TTFT's: `cause` waits as `idle` does.
  assertEquals(withRule("cause").queueWaitS, idle.queueWaitS);
  const bigDoneS = fits.ttftS[0];
  const smallDoneS = 4 + idle.ttftS[2];
  assert(Number.isNaN(fits.queueWaitS[2]) && Number.isNaN(idle.queueWaitS[2]), "the newcomer went");
  // fits: the waiter goes when BIG ends, though the newcomer still waits to prefill there.
  assertAlmostEquals(fits.queueWaitS[1], bigDoneS - 3.9, 1e-9);
  // idle: only once the newcomer's prefill is done too.
  assert(smallDoneS > bigDoneS + 0.1);
  assertAlmostEquals(idle.queueWaitS[1], smallDoneS - 3.9, 1e-9);
  assert(idle.ttftS[1] <= 6.5 && fits.ttftS[1] <= 6.5, "both within the SLO");
});

Deno.test("queue: on the conversation trace past capacity no wait exceeds the TTL, in any band", () => {
  const ttlS = 5;
  const result = simulate(
    CONVERSATIONS,
    config({
      instances: 4,
      speed: 3,
      sloTtftS: 10,
      queue: { ...DEFAULT_SIM_QUEUE, ttlS },
    }),
    run("queue"),
  );
  const report = queueReport(result, 10);
  assert(report.queued > 0 && report.expired > 0, "the run is past capacity");
  for (const band of report.bands) {
    assert(band.maxWaitS <= ttlS + 1e-9, `band ${band.band}: ${band.maxWaitS}`);
  }
  for (let i = 0; i < result.ttftS.length; i++) {
    if (result.instance[i] < 0 && !Number.isNaN(result.queueWaitS[i])) {
      assertAlmostEquals(result.queueWaitS[i], ttlS, 1e-9); // an expired request waited its TTL
    }
  }
  assertEquals(report.rejected, report.requests - report.served);
  assertEquals(report.expired, result.rejectedByReason["queue_timeout"]);
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

Deno.test("queue: when the queue admits nobody, queue and ttft replay identically (re-plans draw apart)", () => {
  const settings = config({
    instances: 4,
    speed: 3,
    sloTtftS: 10,
    refine: true,
    // Re-planned once as it joins, gone a microsecond later: on busy instances none goes.
    queue: { ...DEFAULT_SIM_QUEUE, ttlS: 1e-6, admitWhen: "idle" },
  });
  // random draws on every plan, round_robin counts plans: one extra draw or count would move
  // every later choice.
  for (const policy of ["random", "round_robin"]) {
    const ttft = simulate(CONVERSATIONS, settings, run("ttft", policy));
    const queued = simulate(CONVERSATIONS, settings, run("queue", policy));
    const report = queueReport(queued, 10);
    assert(report.queued > 0 && report.expired === report.queued, `${policy}: all expired`);
    assertEquals(Array.from(queued.ttftS), Array.from(ttft.ttftS), policy);
    assertEquals(Array.from(queued.instance), Array.from(ttft.instance), policy);
  }
});

Deno.test("queue: when nothing is refused, queue and ttft replay identically", () => {
  const settings = config({ instances: 4, speed: 1, sloTtftS: 1_000, refine: true });
  const ttft = simulate(CONVERSATIONS, settings, run("ttft"));
  const queued = simulate(CONVERSATIONS, settings, run("queue"));
  assertEquals(Array.from(queued.ttftS), Array.from(ttft.ttftS));
  assertEquals(Array.from(queued.instance), Array.from(ttft.instance));
  assertEquals(queueReport(queued, 1_000).queued, 0);
});

Deno.test("queue: with decode instances, cause lets requests the TBT refused go as fits does, where idle holds them", () => {
  // No TTFT SLO to speak of: every refusal is the decode side's (one decode instance, 35 ms TBT).
  const withRule = (admitWhen: QueueAdmitWhen) =>
    simulate(
      CONVERSATIONS,
      config({
        instances: 4,
        decodeInstances: 1,
        sloTbtS: 0.035,
        sloTtftS: 1e6,
        speed: 3,
        queue: { ...DEFAULT_SIM_QUEUE, admitWhen },
      }),
      run("queue"),
    );
  const [fits, idle, cause] = [withRule("fits"), withRule("idle"), withRule("cause")];
  assert(!("ttft_slo" in fits.rejectedByReason), JSON.stringify(fits.rejectedByReason));
  const servedAfterWait = (r: typeof fits) =>
    Array.from(r.queueWaitS).filter((w, i) => !Number.isNaN(w) && !Number.isNaN(r.ttftS[i])).length;
  assert(servedAfterWait(fits) > 1.5 * servedAfterWait(idle), "idle holds them back");
  assertEquals(Array.from(cause.queueWaitS), Array.from(fits.queueWaitS));
  assertEquals(Array.from(cause.ttftS), Array.from(fits.ttftS));
});
