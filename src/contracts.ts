/**
 * The contracts between the request path (src/gateway/) and what observes or steers it
 * (src/telemetry/, src/experiment/): the request record handed to observers, the trace
 * interfaces, and arm selection. Types only; every side imports this leaf and none imports the
 * other (docs/architecture.md).
 */
import type { InstanceEntry } from "./cluster/model_cluster.ts";
import type { ModelConfig } from "./config/schema.ts";
import type { Endpoint } from "./openai/endpoints.ts";
import type { LookupResult, PrefixHits } from "./kv/types.ts";
import type { AttemptRecord, ForwardTarget } from "./proxy/forward.ts";
import type { PdProtocol } from "./proxy/pd_protocol.ts";
import type { ObservedUsage } from "./proxy/usage_sniffer.ts";
import type { AdmissionVerdict } from "./scheduling/admission.ts";
import type { NamedPolicy } from "./scheduling/named_policy.ts";
import type { Candidate, Decision } from "./scheduling/types.ts";
import type { DecisionInputs } from "./scheduling/decision_replay.ts";
import type { DecodeCandidate, DecodeDecision } from "./scheduling/decode_policy.ts";
import type { DecodeLoadScope, EarlyRejection } from "./scheduling/pd_admission.ts";
import type { LocalPrefillVerdict } from "./scheduling/local_prefill.ts";

export type { PdProtocol };

/** The decode side of a disaggregated plan: which instance decodes, and why. */
export interface DecodePlan {
  protocol: PdProtocol;
  candidates: DecodeCandidate[];
  decision: DecodeDecision;
  /**
   * The decode batch the admission judged: the pool's mean or the chosen instance's
   * (`decodeLoad`), now, forecast for the end of the prefill, or every request bound for it
   * (`earlyRejection`).
   */
  judgedBatch?: number;
  /** Whose batch that is (the model's `decodeLoad`). */
  judgedLoad?: DecodeLoadScope;
  /** How it was counted (the model's `earlyRejection`). */
  judgedMode?: EarlyRejection;
  /** Predicted TBT with that batch and this request. */
  predictedTbtS?: number;
  /**
   * Conditional disaggregation's verdict (absent: off); `local`: the decode instance prefills
   * the request itself, sent to it whole.
   */
  localPrefill?: LocalPrefillVerdict;
}

/** How the prompt's tokens were obtained, or why there are none (then: load-only dispatch). */
export type TokenSource =
  | "tokenized"
  | "token_ids"
  | "disabled"
  | "failed"
  | "input_error"
  /** A load-routed request: the router reads no prompt from it. */
  | "not_read";

/** Everything decided before the request leaves the router; also what traces and logs explain. */
export interface DispatchPlan {
  tokens?: number[];
  /** Prompt tokens (estimated from the text's length when there are no tokens). */
  promptTokens: number;
  /** Sequences the engine decodes (a batch's prompts × `n`, src/openai/engine_batch.ts); 1 if absent. */
  sequences?: number;
  tokenSource: TokenSource;
  tokenizeError?: string;
  /** Store keys per chunk (all ranks when required); empty when the lookup was skipped. */
  chunkKeys: string[][];
  /** `chunkKeys` flattened: what is looked up, predicted and forgotten. */
  keys: string[];
  /** Why the prompt has no keys although it has tokens (e.g. extra keys the hash cannot take). */
  keysError?: string;
  lookup?: LookupResult;
  hits: PrefixHits;
  poolPrefixTokens: number;
  candidates: Candidate[];
  entries: Map<string, InstanceEntry>;
  decision: Decision;
  /**
   * Set while the model is dispatched by load alone because an instance's KV agreement is
   * `blind` (`kv.onDisagreement: "load_only"`): the reason, e.g. `kv_blind: gpu-a`. `hits` keep
   * the router's prediction; the candidates and `poolPrefixTokens` the policy saw carry none.
   */
  kvLoadOnly?: string;
  policy: NamedPolicy;
  /** The prefill decision's inputs, enough to replay it (src/scheduling/decision_replay.ts). */
  inputs: DecisionInputs;
  admission: AdmissionVerdict;
  /** Predicted TTFT of the best candidate (from the policy, else the TTFT model). */
  predictedTtftS?: number;
  /**
   * Set when the request is disaggregated: `decision` then ranks the prefill side (prefill and
   * neutral instances; a neutral first choice serves the whole request) and this the decode side.
   */
  decode?: DecodePlan;
  /** Milliseconds spent per stage. */
  timings: { tokenizeMs: number; hashMs: number; lookupMs: number; scheduleMs: number };
  /** When each stage started (monotonic ms), for trace spans. */
  stages: {
    tokenizeStart: number;
    hashStart: number;
    lookupStart: number;
    scheduleStart: number;
    admissionStart: number;
    end: number;
  };
}

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

/** How a request got its A/B arm. */
export type AssignmentKind = "sticky" | "random" | "fallback" | "override";

/**
 * One request's story from arrival to the last byte, filled in as it goes and handed once to
 * the observers (metrics, experiment stats, decision log, traces) when it ends.
 */
export interface RequestRecord {
  requestId: string;
  model: string;
  endpoint: Endpoint;
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
  /** The instance that answered (for a disaggregated request: the decode instance). */
  instanceId?: string;
  /** A disaggregated request's prefill instance. */
  prefillInstanceId?: string;
  status: number;
  outcome: RequestOutcome;
  /** A Responses API answer's id (its engine stores it: src/cluster/response_homes.ts). */
  responseId?: string;
  /**
   * Seconds from arrival to the first byte of a streamed (SSE) answer. Absent for a non-streamed
   * answer: its first byte comes after the whole generation, so it has no observable first token.
   */
  ttftS?: number;
  durationS?: number;
  /** Gaps between SSE events after the first, seconds. */
  interTokenS: number[];
  usage: ObservedUsage;
  error?: string;
  /** With `tenants` configured: the client's tenant, and the limit that refused it, if one did. */
  tenant?: string;
  rateLimited?: "requests" | "prompt_tokens" | "fair_share";
  /** Set when the request waited in the flow-control queue (src/gateway/flow_control.ts). */
  queue?: QueueRecord;
}

/** A request's stay in the flow-control queue. */
export interface QueueRecord {
  /** Its band (lower went first). */
  priority: number;
  waitedS: number;
  result: "admitted" | "full" | "pushed_out" | "expired" | "aborted" | "shutting_down" | "failed";
  /**
   * Why it waited: admission `refused` it (it waited to fit), or admission admitted it and late
   * binding `held` it (slo.queue.holdAboveTokens) until an instance had room.
   */
  cause: "refused" | "held";
  /** The error code it was refused with (`queue_full`, `queue_timeout`, `router_shutting_down`). */
  code?: string;
}

export interface RequestObserver {
  /** Once per request, when the last byte went out (or the request failed). */
  onFinished(record: RequestRecord): void;
}

/** One upstream attempt's span: the fetch runs inside it, so the engine continues this trace. */
export interface AttemptTrace {
  run<T>(fn: () => Promise<T>): Promise<T>;
  end(record: AttemptRecord, retried: boolean): void;
}

/** The span tree of one request (docs/observability.md, "Traces"). */
export interface RequestTrace {
  /**
   * Record the pre-dispatch stages (tokenize, hash, store lookup, schedule, admission); again
   * for the plan that admitted a request after its wait (`record.queue` set: no new tokenizing).
   */
  planned(plan: DispatchPlan, record: RequestRecord): void;
  /** Its wait in the flow-control queue, from `startMs` to `endMs` (monotonic). */
  queued?(queue: QueueRecord, startMs: number, endMs: number): void;
  /** One upstream attempt; `leg` names the P/D leg ("upstream" when whole). */
  attempt(
    target: ForwardTarget,
    attemptNumber: number,
    headers: Headers,
    leg?: "prefill" | "decode",
  ): AttemptTrace;
  finish(record: RequestRecord): void;
}

/** Starts the span tree of each request (src/telemetry/tracing.ts). */
export interface RequestTracer {
  begin(request: Request, route: string, startedAt: number): RequestTrace;
}

/** What arm selection needs of a served model: its config and its default policy. */
export interface ServedModel {
  readonly config: ModelConfig;
  readonly defaultPolicy: NamedPolicy;
}

/** A request's arm: its name (the `x-tidegate-arm` header) and the policy that plans it. */
export interface ArmSelection {
  arm: string;
  policy: NamedPolicy;
  /** Set inside an experiment: the arms' version and how this request was assigned. */
  experiment?: RequestRecord["experiment"];
  /** Request headers meant for the router alone (operator override): not forwarded. */
  privateHeaders?: readonly string[];
}

/** Picks the policy arm of a request (A/B experiments); the default is the model's policy. */
export interface ArmSelector {
  /** May throw an HttpError (e.g. 400 for an override naming no arm). */
  select(model: ServedModel, request: Request, body: Record<string, unknown>): ArmSelection;
  /** Called by `Gateway.replace()` (hot reload) with the new models and config. */
  sync?(models: Iterable<ServedModel>, config: { models: ModelConfig[] }): void;
}
