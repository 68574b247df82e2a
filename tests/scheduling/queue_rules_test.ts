/** When the flow-control queue helps: the rules the router and the simulator share. */
import { assert, assertEquals } from "../assert.ts";
import {
  admitsFromQueue,
  fitsAfterWait,
  idleTtftS,
  waitDeadlineMs,
  worthQueueing,
} from "../../src/scheduling/queue_rules.ts";
import { DEFAULT_TTFT_PARAMS, estimateTtft } from "../../src/scheduling/ttft_estimate.ts";
import type { Candidate } from "../../src/scheduling/types.ts";

const candidate = (over: Partial<Candidate>): Candidate => ({
  id: "a",
  healthy: true,
  localPrefixTokens: 0,
  waitingPrefillTokens: 0,
  runningRequests: 0,
  ...over,
});

Deno.test("idle TTFT: the best healthy candidate with its queue emptied, its prefix kept", () => {
  const request = { promptTokens: 8_000, poolPrefixTokens: 0 };
  const busyHolder = candidate({ id: "a", localPrefixTokens: 6_000, waitingPrefillTokens: 90_000 });
  const idleCold = candidate({ id: "b" });
  const down = candidate({ id: "c", healthy: false, localPrefixTokens: 8_000 });
  const idle = idleTtftS(request, [busyHolder, idleCold, down], DEFAULT_TTFT_PARAMS)!;
  const holderAlone = estimateTtft(
    request,
    { ...busyHolder, waitingPrefillTokens: 0 },
    DEFAULT_TTFT_PARAMS,
  ).totalS;
  assertEquals(idle, holderAlone, "the holder's prefix counts, its queue does not");
  assert(idle < estimateTtft(request, idleCold, DEFAULT_TTFT_PARAMS).totalS);
  assertEquals(idleTtftS(request, [down], DEFAULT_TTFT_PARAMS), undefined);
});

Deno.test("worth queueing only while an idle instance could meet the SLO; without an SLO, always", () => {
  assertEquals(worthQueueing(1.9, 2), true);
  assertEquals(worthQueueing(2.1, 2), false);
  assertEquals(worthQueueing(50, undefined), true);
  assertEquals(worthQueueing(undefined, 2), true, "nothing known: let it wait");
});

Deno.test("a wait ends at its TTL or once the time since arrival used the TTFT SLO, whichever is first", () => {
  assertEquals(waitDeadlineMs({ arrivedMs: 1_000, joinedMs: 1_200 }, 30, 2), 3_000);
  assertEquals(waitDeadlineMs({ arrivedMs: 1_000, joinedMs: 1_200 }, 0.5, 2), 1_700);
  assertEquals(waitDeadlineMs({ arrivedMs: 1_000, joinedMs: 1_200 }, 30, undefined), 31_200);
});

Deno.test("admitted after a wait only if the wait plus the predicted TTFT fits the SLO", () => {
  assertEquals(fitsAfterWait(1.5, 0.4, 2), true);
  assertEquals(fitsAfterWait(1.5, 0.6, 2), false);
  assertEquals(fitsAfterWait(undefined, 5, 2), true);
  assertEquals(fitsAfterWait(9, 9, undefined), true);
});

Deno.test("admitsFromQueue: fits needs only the fit; idle also needs no prefill waiting on the instance", () => {
  const busy = { predictedTtftS: 1.5, waitingPrefillTokens: 2_000 };
  const idle = { predictedTtftS: 1.5, waitingPrefillTokens: 0 };
  assertEquals(admitsFromQueue("fits", busy, 0.4, 2, "ttft_slo"), true);
  assertEquals(admitsFromQueue("idle", busy, 0.4, 2, "ttft_slo"), false);
  assertEquals(admitsFromQueue("idle", idle, 0.4, 2, "ttft_slo"), true);
  assertEquals(admitsFromQueue("idle", idle, 0.6, 2, "ttft_slo"), false, "idle but past the SLO");
  assertEquals(admitsFromQueue("fits", busy, 0.6, 2, "ttft_slo"), false);
  const unknown = { predictedTtftS: 1.5, waitingPrefillTokens: undefined };
  assertEquals(
    admitsFromQueue("idle", unknown, 0.4, 2, "ttft_slo"),
    true,
    "no instance to judge: the fit",
  );
});

Deno.test("admitsFromQueue: cause waits for an idle instance only when the TTFT refused the request", () => {
  const busy = { predictedTtftS: 1.5, waitingPrefillTokens: 2_000 };
  const idle = { predictedTtftS: 1.5, waitingPrefillTokens: 0 };
  assertEquals(admitsFromQueue("cause", busy, 0.4, 2, "ttft_slo"), false, "as idle");
  assertEquals(admitsFromQueue("cause", idle, 0.4, 2, "ttft_slo"), true);
  assertEquals(admitsFromQueue("cause", busy, 0.4, 2, "tbt_slo"), true, "decode side: as fits");
  assertEquals(admitsFromQueue("cause", busy, 0.4, 2, "load_threshold"), true, "held: as fits");
  assertEquals(admitsFromQueue("cause", busy, 0.6, 2, "tbt_slo"), false, "past the SLO");
  assertEquals(admitsFromQueue("idle", busy, 0.4, 2, "tbt_slo"), false, "idle ignores the cause");
});
