/**
 * What a policy sees of one instance. Built by the dispatcher (or the simulator) from the
 * cluster view and the prefix lookup; policies never read anything else.
 */
export interface Candidate {
  id: string;
  /** Unhealthy candidates may be passed in; a policy must never choose one. */
  healthy: boolean;
  /** Prompt tokens this instance holds locally, counted from token 0. */
  localPrefixTokens: number;
  /** Prefill tokens already waiting or running on the instance (queued work). */
  waitingPrefillTokens: number;
  /** Requests decoding on the instance (for TBT admission and p2c tie-breaks). */
  runningRequests: number;
  /** Optional per-instance prefill-time model coefficients learned online. */
  prefillModel?: PrefillModelCoefficients;
  /**
   * Requests behind `waitingPrefillTokens` (the load account's `prefillRequests`). Lets a
   * TTFT policy split the queued tokens into requests instead of pricing them as one prompt.
   */
  waitingPrefillRequests?: number;
  /** Predicted seconds of prefill work queued ahead, when the dispatcher tracks it directly. */
  queuedPrefillS?: number;
}

/**
 * `T(n_new, n_cached)` seconds, n in thousands of tokens:
 * a·n_new + b·n_new·(n_new + 2·n_cached) + r·n_cached + c (see prefill_model.ts).
 */
export interface PrefillModelCoefficients {
  linear: number;
  quadratic: number;
  constant?: number;
  /** r: seconds per thousand cached tokens (loading the reused KV into the GPUs). */
  cachedLinear?: number;
}

/** A block's key: the router's store key, or a trace's hash id. */
export type BlockKey = string | number;

export interface ScheduleRequest {
  promptTokens: number;
  /** Tokens of the prompt present anywhere in the shared pool, from token 0. */
  poolPrefixTokens: number;
  /**
   * Whether the chosen engine may load the pool's part of the prefix (prefill_choice.ts sets it
   * from its PoolUse: the router's engines read only what they hold). Absent: it may.
   */
  poolLoads?: boolean;
  /**
   * The key of the prompt's first block no instance holds (prefix_home.ts: the caller looks it
   * up, so that a logged decision replays without the prompt's keys). Absent: no home.
   */
  homeKey?: BlockKey;
}

/** Everything non-deterministic a policy may use, passed in so any decision can be replayed. */
export interface ScheduleContext {
  /** Uniform [0, 1). */
  random: () => number;
  /** A per-model counter that grows by one per decision (round robin). */
  sequence: number;
}

export interface CandidateScore {
  id: string;
  /** The named terms that make up `score` (e.g. prefixMissTokens, waitingPrefillTokens). */
  terms: Record<string, number>;
  /** Lower is better for every policy. */
  score: number;
  /** Why the candidate was excluded, when it was. */
  excluded?: string;
  /**
   * Prefix tokens the policy plans this instance to load from the shared pool beyond its local
   * prefix (mooncake_ttft). The dispatcher passes it on; 0 or absent means local reuse only.
   */
  transferTokens?: number;
  /** Informative quantities that are not part of `score` (tokens, tie-break draws, flags). */
  detail?: Record<string, number>;
}

export interface Decision {
  policy: string;
  /** Healthy candidates best first: the proxy retries down this list. */
  ranking: string[];
  /** Every candidate passed in, with its terms. */
  scores: CandidateScore[];
  /** Predicted TTFT of the chosen candidate in seconds, when the policy predicts one. */
  predictedTtftS?: number;
}

export interface Policy {
  readonly name: string;
  select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision;
}
