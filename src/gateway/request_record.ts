import type { AssignmentKind } from "../experiment/stats.ts";
import type { AttemptRecord } from "../proxy/forward.ts";
import type { ObservedUsage } from "../proxy/usage_sniffer.ts";
import type { DispatchPlan } from "./dispatch_plan.ts";

/** How a request ended, as counted in metrics and experiment statistics. */
export type RequestOutcome =
  | "ok"
  | "upstream_error_status"
  | "client_error"
  | "rejected"
  | "no_instance"
  | "upstream_failed"
  | "upstream_timeout"
  | "client_aborted"
  | "midstream_failure"
  | "internal_error";

/**
 * One request's story from arrival to the last byte, filled in as it goes and handed once to
 * the observers (metrics, experiment stats, decision log, traces) when it ends.
 */
export interface RequestRecord {
  requestId: string;
  model: string;
  endpoint: "completions" | "chat";
  arm: string;
  /** Inside an A/B experiment: the arms' version and how the request got its arm. */
  experiment?: { version: number; assignment: AssignmentKind; cluster: number };
  stream: boolean;
  /** Monotonic ms at arrival. */
  startedAt: number;
  /** Wall-clock ms at arrival (for logs and the dashboard). */
  startedAtWallMs: number;
  plan?: DispatchPlan;
  attempts: AttemptRecord[];
  instanceId?: string;
  status: number;
  outcome: RequestOutcome;
  /** Seconds from arrival to the first response byte from the engine. */
  ttftS?: number;
  durationS?: number;
  /** Gaps between SSE events after the first, seconds. */
  interTokenS: number[];
  usage: ObservedUsage;
  error?: string;
}

export interface RequestObserver {
  /** After the plan is made, before any upstream attempt. */
  onPlanned?(record: RequestRecord): void;
  /** Once per request, when the last byte went out (or the request failed). */
  onFinished(record: RequestRecord): void;
}
