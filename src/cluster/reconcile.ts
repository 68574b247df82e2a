/**
 * Combines the router's own account of an instance (LoadAccount: live, exact for our traffic,
 * blind to other routers) with the engine's report (covers everyone's traffic, but only as of its
 * observation time) into the load the policies see. Pure.
 *
 * The key idea: when the poller asks the engine, it also snapshots our account (`ours₀`). The
 * engine's figure minus `ours₀` is everyone else's share at that moment; our share is then taken
 * live from the account, so our own dispatches and first tokens since the report count at once.
 *
 * Waiting prefill tokens (`Candidate.waitingPrefillTokens`):
 *
 *   engine reports pending tokens P (SGLang):
 *     waiting = max(0, P − ours₀.prefillTokens) + ours.prefillTokens
 *   engine reports counts only (vLLM: W waiting requests):
 *     waiting = max(0, W − ours₀.prefillRequests) · meanUncachedTokens + ours.prefillTokens
 *   no usable report (none, failed or stale):
 *     waiting = ours.prefillTokens
 *
 * Running requests (`Candidate.runningRequests`), with R the engine's running count:
 *
 *   othersWaiting = max(0, W − ours₀.prefillRequests)
 *   othersActive  = max(0, (W + R) − (ours₀.prefillRequests + ours₀.decodeRequests))
 *   running       = max(0, othersActive − othersWaiting) + ours.decodeRequests
 *
 * (vLLM counts a request part-way through its prefill as running; comparing totals of active
 * requests keeps our own prefilling requests from showing up as someone else's decodes.)
 *
 * On a decode instance the report and `ours₀` first go through decode_view.ts: vLLM's deferred
 * waiting requests (KV arriving) count as running, and our joiners are placed where the protocol
 * puts them.
 *
 * Known approximations, all bounded by the report's age: others' share is as of the observation
 * (their progress since is unknown); a request dispatched just before the poll but not yet queued
 * by the engine makes the subtraction undercount others (clamped at 0); SGLang counts the full
 * prompt of a queued request, cached part included, so others' share is overstated by the cached
 * part of our queued prompts. Several routers sharing a cluster agree to within what each of them
 * dispatched or saw complete since the report (tests/cluster/reconcile_test.ts).
 */
import type { EngineLoadReport } from "./engine_load.ts";
import type { InstanceLoad } from "./load_account.ts";

export interface ReconcileInput {
  /** Our account now. */
  local: InstanceLoad;
  /** The engine's latest report, only if usable (fresh), with our account when it was observed. */
  engine?: {
    report: EngineLoadReport;
    /** Missing means we had nothing in flight then (or did not record it): others get it all. */
    localAtObservation?: InstanceLoad;
  };
  /** Mean uncached prefill tokens per request recently dispatched (RecentPrefillSizes). */
  meanUncachedTokens: number;
}

export type ReconcileBasis = "engine_tokens" | "engine_counts" | "local";

export interface ReconciledLoad {
  /** For `Candidate.waitingPrefillTokens`. */
  waitingPrefillTokens: number;
  /** For `Candidate.runningRequests`. */
  runningRequests: number;
  basis: ReconcileBasis;
  /** The parts of the sums, for explanations and dashboards. */
  terms: {
    ourPrefillTokens: number;
    othersPrefillTokens: number;
    ourDecodeRequests: number;
    othersRunningRequests: number;
    othersWaitingRequests: number;
  };
}

const NOTHING: InstanceLoad = { prefillTokens: 0, prefillRequests: 0, decodeRequests: 0 };

export function reconcileLoad(input: ReconcileInput): ReconciledLoad {
  const ours = input.local;
  if (!input.engine) {
    return {
      waitingPrefillTokens: ours.prefillTokens,
      runningRequests: ours.decodeRequests,
      basis: "local",
      terms: {
        ourPrefillTokens: ours.prefillTokens,
        othersPrefillTokens: 0,
        ourDecodeRequests: ours.decodeRequests,
        othersRunningRequests: 0,
        othersWaitingRequests: 0,
      },
    };
  }
  const { report } = input.engine;
  const ours0 = input.engine.localAtObservation ?? NOTHING;
  const W = report.waitingRequests;
  const R = report.runningRequests;
  const othersWaiting = Math.max(0, W - ours0.prefillRequests);
  const othersActive = Math.max(0, W + R - (ours0.prefillRequests + ours0.decodeRequests));
  const othersRunning = Math.max(0, othersActive - othersWaiting);
  const tokens = report.pendingPrefillTokens !== undefined;
  const othersPrefillTokens = tokens
    ? Math.max(0, report.pendingPrefillTokens! - ours0.prefillTokens)
    : othersWaiting * Math.max(0, input.meanUncachedTokens);
  return {
    waitingPrefillTokens: othersPrefillTokens + ours.prefillTokens,
    runningRequests: othersRunning + ours.decodeRequests,
    basis: tokens ? "engine_tokens" : "engine_counts",
    terms: {
      ourPrefillTokens: ours.prefillTokens,
      othersPrefillTokens,
      ourDecodeRequests: ours.decodeRequests,
      othersRunningRequests: othersRunning,
      othersWaitingRequests: othersWaiting,
    },
  };
}
