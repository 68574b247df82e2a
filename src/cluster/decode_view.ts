/**
 * A decode instance's engine report and our own load at its observation, made to count the same
 * requests before reconciliation (reconcile.ts). Our joiners (decode leases whose request still
 * prefills elsewhere: DecodeOutlook.leasedJoiners) are where the protocol puts them: not sent yet
 * (`vllm-nixl` sends the decode leg after the prefill), or on the engine from the start (the
 * concurrent protocols), where vLLM 0.32 and later count them as deferred waiting requests and
 * SGLang (its prealloc and transfer queues) and older vLLM as waiting ones. A request deferred on
 * a decode instance is about to decode, not to prefill: it counts as running. Pure.
 */
import type { EngineLoadReport } from "./engine_load.ts";
import type { InstanceLoad } from "./load_account.ts";

export interface DecodeView {
  report: EngineLoadReport;
  /** Our load as the engine could see it when it reported. */
  ours: InstanceLoad;
}

/**
 * `joiners`: our joiners at the observation; `sentAtOnce`: the decode leg goes out with the
 * prefill (vllm-mooncake, sglang), else after it (vllm-nixl).
 */
export function decodeView(
  report: EngineLoadReport,
  oursAtObservation: InstanceLoad,
  joiners: number,
  sentAtOnce: boolean,
): DecodeView {
  const deferred = report.deferredWaitingRequests;
  const moved = deferred === undefined ? report : {
    ...report,
    waitingRequests: Math.max(0, report.waitingRequests - deferred),
    runningRequests: report.runningRequests + Math.min(deferred, report.waitingRequests),
  };
  const ours = oursAtObservation;
  const away = Math.min(joiners, ours.decodeRequests);
  if (away === 0 || (sentAtOnce && deferred !== undefined)) return { report: moved, ours };
  const decodeRequests = ours.decodeRequests - away;
  // Sent at once and reported among the waiting: there they are.
  const prefillRequests = ours.prefillRequests + (sentAtOnce ? away : 0);
  return { report: moved, ours: { ...ours, decodeRequests, prefillRequests } };
}
