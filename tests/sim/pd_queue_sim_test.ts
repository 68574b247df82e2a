/**
 * The flow-control queue in the P/D simulator (`PdRun.queue`, the router's rules driven on
 * simulated time by src/sim/sim_queue.ts): a request that admission refuses at arrival waits and
 * goes once a re-plan admits it, its wait counted in its TTFT; at its deadline it is refused.
 */
import { assert, assertEquals } from "../assert.ts";
import { type PdRun, simulatePd } from "../../src/sim/pd_simulator.ts";
import { DEFAULT_SIM_QUEUE } from "../../src/sim/sim_queue.ts";
import type { QueueAdmitWhen } from "../../src/scheduling/queue_rules.ts";
import { summarizePd } from "../../src/sim/pd_summary.ts";
import { parseMooncakeTrace } from "../../src/sim/trace.ts";
import { pdTestConfig } from "./pd_test_config.ts";

const TEXT = await Deno.readTextFile(new URL("../data/conversation_trace.jsonl", import.meta.url));
const SLICE = parseMooncakeTrace(TEXT, { limit: 3000 });

/** A decode-bound cluster past its capacity, where early rejection refuses many arrivals. */
function run(queue: boolean, ttlS = DEFAULT_SIM_QUEUE.ttlS) {
  const config = pdTestConfig(SLICE, { speed: 3.2 });
  const pdRun: PdRun = {
    label: queue ? "queue" : "refuse",
    policy: "mooncake_ttft",
    topology: { kind: "pd", prefill: 12, decode: 4 },
    admission: "early",
    ...(queue ? { queue: { ...DEFAULT_SIM_QUEUE, ttlS } } : {}),
  };
  const result = simulatePd(SLICE, config, pdRun);
  return { result, summary: summarizePd(result, config.sloTtftS, config.sloTbtS) };
}

Deno.test("P/D queue: requests refused at a peak wait and are served within both SLOs later", () => {
  const refused = run(false);
  const queued = run(true);
  assert(
    queued.summary.withinBothSlos > refused.summary.withinBothSlos * 1.05,
    `${queued.summary.withinBothSlos} within both SLOs with the queue, ` +
      `${refused.summary.withinBothSlos} without`,
  );
  assert(queued.summary.rejected < refused.summary.rejected);
  assertEquals(refused.result.queueWaitS, undefined);
  const waits = queued.result.queueWaitS!;
  const stats = queued.summary.queue!;
  assert(stats.servedAfterWait > 0 && stats.servedAfterWait < stats.waited, JSON.stringify(stats));
  // A wait is part of the request's TTFT; one that timed out is a refusal, never served.
  waits.forEach((wait, i) => {
    if (Number.isNaN(wait)) return;
    const ttft = queued.result.ttftS[i];
    if (!Number.isNaN(ttft)) assert(ttft >= wait, `request ${i}: TTFT ${ttft} < wait ${wait}`);
  });
  // With early rejection nothing is refused after its prefill: who waited was served or timed out.
  assertEquals(
    queued.result.rejectedByReason.queue_timeout,
    stats.waited - stats.servedAfterWait,
  );
  assertEquals(
    Object.values(queued.result.rejectedByReason).reduce((a, b) => a + b, 0),
    queued.summary.rejected,
  );
  // Nobody is left waiting when the trace ends.
  assertEquals(queued.summary.served + queued.summary.rejected, SLICE.length);
  // Sent from the queue only when its predicted TTFT, counted from arrival, fits the SLO.
  waits.forEach((wait, i) => {
    if (Number.isNaN(wait) || Number.isNaN(queued.result.ttftS[i])) return;
    const predicted = queued.result.predictedTtftS[i];
    assert(predicted >= wait && predicted <= 10 + 1e-9, `request ${i}: predicted ${predicted}`);
  });
});

Deno.test("P/D queue: a request leaves at its TTL, and the run is deterministic", () => {
  const short = run(true, 0.5);
  // A request served after a wait went before its TTL was up.
  short.result.queueWaitS!.forEach((wait, i) => {
    if (Number.isNaN(wait) || Number.isNaN(short.result.ttftS[i])) return;
    assert(wait <= 0.5 + 1e-9, `request ${i} served after ${wait} s in the queue`);
  });
  assertEquals(Array.from(run(true, 0.5).result.ttftS), Array.from(short.result.ttftS));
  // With a shorter TTL fewer wait long enough to go.
  assert(short.summary.queue!.servedAfterWait < run(true).summary.queue!.servedAfterWait);
});

Deno.test("P/D queue: not modelled with local prefill", () => {
  const config = pdTestConfig(SLICE.slice(0, 10));
  let message = "";
  try {
    simulatePd(SLICE.slice(0, 10), config, {
      label: "both",
      policy: "mooncake_ttft",
      topology: { kind: "pd", prefill: 2, decode: 2 },
      admission: "early",
      localPrefill: { mode: "threshold", maxTokens: 1000 },
      queue: DEFAULT_SIM_QUEUE,
    });
  } catch (error) {
    message = (error as Error).message;
  }
  assert(message.includes("does not model the queue with local prefill"), message);
});

Deno.test("P/D queue with committed admission: what it releases no longer lands on one batch, so more keep their TBT", () => {
  const config = pdTestConfig(SLICE, { speed: 3.2 });
  const summaryOf = (admission: "early" | "committed") => {
    const result = simulatePd(SLICE, config, {
      label: admission,
      policy: "mooncake_ttft",
      topology: { kind: "pd", prefill: 8, decode: 8 },
      admission,
      queue: DEFAULT_SIM_QUEUE,
    });
    return summarizePd(result, config.sloTtftS, config.sloTbtS);
  };
  const [early, committed] = [summaryOf("early"), summaryOf("committed")];
  assert(
    committed.tbtSloRequestShare > early.tbtSloRequestShare + 0.02,
    `TPOT within the SLO: ${committed.tbtSloRequestShare} committed, ${early.tbtSloRequestShare} early`,
  );
  assert(
    committed.withinBothSlos > early.withinBothSlos,
    `${committed.withinBothSlos} within both SLOs committed, ${early.withinBothSlos} early`,
  );
});

Deno.test("P/D queue, admitWhen cause: decode-refused requests go as with fits, TTFT-refused ones wait for an idle prefill", () => {
  const slice = SLICE.slice(0, 1500);
  const config = pdTestConfig(slice, { speed: 3.2 });
  const waits = (prefill: number, decode: number, admitWhen: QueueAdmitWhen) => {
    const result = simulatePd(slice, config, {
      label: admitWhen,
      policy: "mooncake_ttft",
      topology: { kind: "pd", prefill, decode },
      admission: "committed",
      queue: { ...DEFAULT_SIM_QUEUE, admitWhen },
    });
    return summarizePd(result, config.sloTtftS, config.sloTbtS).queue!;
  };
  // 8P+8D: most of those waiting were refused for the decode batch, and idle holds them back.
  const [fits, idle, cause] = (["fits", "idle", "cause"] as const).map((w) => waits(8, 8, w));
  assert(cause.servedAfterWait > 1.5 * idle.servedAfterWait, JSON.stringify({ idle, cause }));
  assert(cause.servedAfterWait > 0.9 * fits.servedAfterWait, JSON.stringify({ fits, cause }));
  // 4P+12D: refused for their TTFT, they wait as with idle.
  assertEquals(waits(4, 12, "cause"), waits(4, 12, "idle"));
  assert(waits(4, 12, "fits").servedAfterWait > 0);
});
