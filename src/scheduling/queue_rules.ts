/**
 * When the flow-control queue helps and when it would only hold a request back, shared by the
 * router (src/gateway/flow_control.ts, gateway.ts) and the simulator (src/sim/sim_queue.ts). The
 * client's TTFT counts its wait, so a request is worth queueing only while it can still meet the
 * TTFT SLO: it waits at most until its wait alone has used the SLO, and is admitted only when its
 * predicted TTFT fits what is left (with `idle`, moreover only onto an instance with no prefill
 * waiting). Pure.
 */
import type { AdmissionRefusal } from "./admission.ts";
import { estimateTtft, type TtftModelParams } from "./ttft_estimate.ts";
import type { Candidate, ScheduleRequest } from "./types.ts";

/** Waiting requests one pass re-plans before it stops: bounded work, no head-of-line blocking. */
export const REPLAN_WINDOW = 8;

/** The request's TTFT on its best candidate with nothing queued there: the least it can get. */
export function idleTtftS(
  request: ScheduleRequest,
  candidates: readonly Candidate[],
  params: TtftModelParams,
): number | undefined {
  let best: number | undefined;
  for (const candidate of candidates) {
    if (!candidate.healthy) continue;
    const idle = { ...candidate, waitingPrefillTokens: 0, waitingPrefillRequests: 0 };
    const total = estimateTtft(request, idle, params).totalS;
    if (best === undefined || total < best) best = total;
  }
  return best;
}

/** A refused request waits only if an idle instance could serve it within the TTFT SLO. */
export function worthQueueing(idleS: number | undefined, ttftSloS: number | undefined): boolean {
  return ttftSloS === undefined || idleS === undefined || idleS <= ttftSloS;
}

/**
 * When a waiting request leaves unserved (monotonic ms): its TTL from when it joined, or once the
 * time since it arrived reaches the TTFT SLO, whichever is first.
 */
export function waitDeadlineMs(
  times: { arrivedMs: number; joinedMs: number },
  ttlS: number,
  ttftSloS: number | undefined,
): number {
  const byTtl = times.joinedMs + ttlS * 1000;
  return ttftSloS === undefined ? byTtl : Math.min(byTtl, times.arrivedMs + ttftSloS * 1000);
}

/** Whether a request admitted on its own predicted TTFT still meets the SLO counting its wait. */
export function fitsAfterWait(
  predictedTtftS: number | undefined,
  sinceArrivalS: number,
  ttftSloS: number | undefined,
): boolean {
  if (ttftSloS === undefined || predictedTtftS === undefined) return true;
  return sinceArrivalS + predictedTtftS <= ttftSloS;
}

/**
 * When a waiting request may go (`slo.queue.admitWhen`): `fits`, as soon as its predicted TTFT fits
 * what its wait left of the SLO; `idle`, moreover only onto an instance with nothing waiting to
 * prefill, so the queue fills capacity admitted traffic leaves idle instead of putting its work
 * ahead of newcomers: within 1% of no queue's goodput in the simulator, as it rescues few past
 * capacity (docs/sim/queue/README.md); `cause`, `idle` for a request refused for its TTFT (the
 * prefill side was the limit) and `fits` for one refused on the decode side or held by late
 * binding, which wait for room that frees as requests end (docs/sim/pd/README.md).
 */
export const QUEUE_ADMIT_WHEN = ["fits", "idle", "cause"] as const;
export type QueueAdmitWhen = typeof QUEUE_ADMIT_WHEN[number];

/**
 * Whether a re-planned waiting request goes now; `waitingPrefillTokens` is its chosen instance's
 * (undefined when the plan has none to judge, e.g. a local prefill: then only the fit counts);
 * `refusedFor`, the reason of the refusal that queued it (admission.ts `AdmissionRefusal`).
 */
export function admitsFromQueue(
  when: QueueAdmitWhen,
  chosen: { predictedTtftS: number | undefined; waitingPrefillTokens: number | undefined },
  sinceArrivalS: number,
  ttftSloS: number | undefined,
  refusedFor: AdmissionRefusal["reason"],
): boolean {
  if (!fitsAfterWait(chosen.predictedTtftS, sinceArrivalS, ttftSloS)) return false;
  const waitsForIdle = when === "idle" || (when === "cause" && refusedFor === "ttft_slo");
  return !waitsForIdle || (chosen.waitingPrefillTokens ?? 0) === 0;
}
