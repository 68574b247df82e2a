import type { LoadLease } from "../cluster/load_account.ts";
import type { InstanceEntry } from "../cluster/model_cluster.ts";
import type { ExtraKeys } from "../hashing/types.ts";
import { withLatestPredictions } from "../kv/merged_index.ts";
import { computePrefixHits } from "../kv/prefix.ts";
import type { LookupResult, PrefixHits } from "../kv/types.ts";
import type { ParsedRequest } from "../openai/request.ts";
import { type AdmissionVerdict, admit } from "../scheduling/admission.ts";
import { DEFAULT_DECODE_MODEL, predictTbtS } from "../scheduling/decode_model.ts";
import { estimateTtft } from "../scheduling/ttft_estimate.ts";
import type { Candidate, CandidateScore, Decision } from "../scheduling/types.ts";
import { TokenizeInputError } from "../tokenize/errors.ts";
import { tryTokenize } from "../tokenize/try_tokenize.ts";
import type { ModelRuntime, NamedPolicy } from "./model_runtime.ts";

/** How the prompt's tokens were obtained, or why there are none (then: load-only dispatch). */
export type TokenSource = "tokenized" | "token_ids" | "disabled" | "failed" | "input_error";

/** Everything decided before the request leaves the router; also what traces and logs explain. */
export interface DispatchPlan {
  tokens?: number[];
  /** Prompt tokens (estimated from the text's length when there are no tokens). */
  promptTokens: number;
  tokenSource: TokenSource;
  tokenizeError?: string;
  /** Store keys per chunk (all ranks when required); empty when the lookup was skipped. */
  chunkKeys: string[][];
  /** `chunkKeys` flattened: what is looked up, predicted and forgotten. */
  keys: string[];
  lookup?: LookupResult;
  hits: PrefixHits;
  poolPrefixTokens: number;
  candidates: Candidate[];
  entries: Map<string, InstanceEntry>;
  decision: Decision;
  policy: NamedPolicy;
  admission: AdmissionVerdict;
  /** Predicted TTFT of the best candidate (from the policy, else the TTFT model). */
  predictedTtftS?: number;
  /**
   * The load lease on the first choice, taken in the same synchronous step as the decision so
   * that concurrent requests see each other's work (else a burst all picks the same instance).
   */
  reservation?: { instanceId: string; lease: LoadLease };
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

export interface PlanContext {
  now: () => number;
  random: () => number;
  policy: NamedPolicy;
  extraKeys?: ExtraKeys;
}

/**
 * tokenize → chunk keys → store lookup → candidates → policy → admission. Never throws for
 * tokenizer or store trouble: those degrade to load-only dispatch, as the issue asks.
 */
export async function planDispatch(
  runtime: ModelRuntime,
  request: ParsedRequest,
  context: PlanContext,
): Promise<DispatchPlan> {
  const { now } = context;
  const config = runtime.config;

  const tokenizeStart = now();
  let start = tokenizeStart;
  const tokenized = await tokenize(runtime, request);
  const tokenizeMs = now() - start;
  const promptTokens = (tokenized.tokens?.length ?? estimateTokens(request)) *
    (1 + promptBatchExtra(request));

  start = now();
  const hashStart = start;
  const tokens = tokenized.tokens;
  const lookupEnabled = runtime.store !== undefined || runtime.predicted !== undefined;
  const chunkKeys = tokens && tokens.length >= config.kv.minPromptTokens && lookupEnabled
    ? runtime.keyScheme.chunkKeys(tokens, context.extraKeys)
    : [];
  const keys = chunkKeys.flat();
  const hashMs = now() - start;

  start = now();
  const lookupStart = start;
  let lookup: LookupResult | undefined;
  if (keys.length > 0) {
    lookup = runtime.store
      ? await runtime.store.lookup(keys, { deadlineMs: config.kv.timeoutMs })
      : noStoreLookup(keys);
    // The router's own recent dispatches, read now, in the same synchronous step as this
    // decision and its reservation, so that a burst's requests see each other (issue 4).
    if (runtime.predicted) lookup = withLatestPredictions(lookup, keys, runtime.predicted);
  }
  const lookupMs = now() - start;

  start = now();
  const scheduleStart = start;
  const chunkSize = config.kv.chunkSize;
  const hits = lookup
    ? computePrefixHits(
      chunkKeys,
      lookup.locations,
      runtime.cluster.entries().map((e) => ({ id: e.config.id, kvHost: e.config.kvHost })),
    )
    : { poolChunks: 0, localChunks: new Map<string, number>() };
  const cap = (chunks: number) => Math.min(promptTokens, chunks * chunkSize);
  const { candidates: all, entries } = runtime.cluster.candidates((id) =>
    cap(hits.localChunks.get(id) ?? 0)
  );
  const candidates = all.map((candidate) => {
    const estimator = runtime.prefillEstimators.get(candidate.id);
    return estimator && estimator.sampleCount > 0
      ? { ...candidate, prefillModel: estimator.model() }
      : candidate;
  });
  const poolPrefixTokens = cap(hits.poolChunks);
  const scheduleRequest = { promptTokens, poolPrefixTokens };
  const decision = context.policy.policy.select(scheduleRequest, candidates, {
    random: context.random,
    sequence: runtime.sequence++,
  });

  const admissionStart = now();
  let predictedTtftS = decision.predictedTtftS;
  const best = candidates.find((c) => c.id === decision.ranking[0]);
  if (predictedTtftS === undefined && best) {
    predictedTtftS = estimateTtft(scheduleRequest, best, context.policy.ttftParams, {
      allowTransfer: false,
    }).totalS;
  }
  const slo = config.slo;
  const admission = admit(
    {
      predictedTtftS,
      predictedTbtS: slo.tbtS === undefined ? undefined : predictTbtS(
        DEFAULT_DECODE_MODEL,
        candidates.filter((c) => c.healthy).map((c) => c.runningRequests),
      ),
      instanceId: best?.id,
    },
    { enabled: slo.admission, ttftSloS: slo.ttftS, tbtSloS: slo.tbtS },
  );
  const end = now();
  const scheduleMs = end - start;

  const plan: DispatchPlan = {
    tokens,
    promptTokens,
    tokenSource: tokenized.source,
    tokenizeError: tokenized.error,
    chunkKeys,
    keys,
    lookup,
    hits,
    poolPrefixTokens,
    candidates,
    entries: new Map(entries.map((e) => [e.config.id, e])),
    decision,
    policy: context.policy,
    admission,
    predictedTtftS,
    timings: { tokenizeMs, hashMs, lookupMs, scheduleMs },
    stages: { tokenizeStart, hashStart, lookupStart, scheduleStart, admissionStart, end },
  };
  const first = decision.ranking[0];
  if (admission.admit && first !== undefined) {
    plan.reservation = { instanceId: first, lease: reserve(runtime, plan, first, now()) };
  }
  return plan;
}

/**
 * Leases the instance's share of the prompt and predicts its KV writes: both must be visible to
 * the very next decision, before any byte is sent.
 */
export function reserve(
  runtime: ModelRuntime,
  plan: DispatchPlan,
  instanceId: string,
  at: number,
): LoadLease {
  const uncached = uncachedTokens(plan, instanceId);
  runtime.cluster.recentPrefill.record(uncached, at);
  if (plan.keys.length > 0 && runtime.predicted) {
    runtime.predicted.record(plan.keys, {
      instanceId,
      kvHost: plan.entries.get(instanceId)?.config.kvHost,
    });
  }
  return runtime.cluster.account.lease(instanceId, uncached);
}

/** The answer when no store is configured: nothing known but the router's predictions. */
function noStoreLookup(keys: string[]): LookupResult {
  return {
    outcome: "skipped",
    locations: new Map(),
    keysQueried: new Set(keys).size,
    batches: 0,
    attempts: 0,
    elapsedMs: 0,
  };
}

/** Prompt tokens the chosen instance has to compute, given what the policy planned to reuse. */
export function uncachedTokens(plan: DispatchPlan, instanceId: string): number {
  const candidate = plan.candidates.find((c) => c.id === instanceId);
  const score = plan.decision.scores.find((s) => s.id === instanceId);
  const reused = (candidate?.localPrefixTokens ?? 0) + (score?.transferTokens ?? 0);
  return Math.max(0, plan.promptTokens - reused);
}

export function scoreOf(plan: DispatchPlan, instanceId: string): CandidateScore | undefined {
  return plan.decision.scores.find((s) => s.id === instanceId);
}

async function tokenize(
  runtime: ModelRuntime,
  request: ParsedRequest,
): Promise<{ tokens?: number[]; source: TokenSource; error?: string }> {
  const prompt = request.prompt;
  if (prompt.kind === "tokens") return { tokens: prompt.tokens, source: "token_ids" };
  try {
    const outcome = await tryTokenize(
      prompt.kind === "text"
        ? runtime.tokenizer.encode(prompt.text, { addSpecialTokens: true })
        : runtime.tokenizer.encodeChat(prompt.messages, {
          tools: prompt.tools,
          chatTemplateKwargs: prompt.chatTemplateKwargs,
        }),
    );
    if (outcome.ok) return { tokens: outcome.tokens, source: "tokenized" };
    return { source: outcome.reason, error: outcome.error.message };
  } catch (error) {
    const message = (error as Error).message;
    // The engine, not the router, is the authority on what it accepts (its template may differ,
    // it may take images): forward the request by load and let the engine answer.
    if (error instanceof TokenizeInputError) return { source: "input_error", error: message };
    runtime.tokenizerFailures.record(
      runtime.tokenizer.mode,
      prompt.kind === "text" ? "text" : "chat",
      error as Error,
    );
    return { source: "failed", error: message };
  }
}

/** ~4 characters per token: only used for load accounting when the prompt has no tokens. */
function estimateTokens(request: ParsedRequest): number {
  const prompt = request.prompt;
  if (prompt.kind === "text") return Math.ceil(prompt.text.length / 4);
  if (prompt.kind === "tokens") return prompt.tokens.length;
  let chars = 0;
  for (const message of prompt.messages) {
    chars += typeof message.content === "string"
      ? message.content.length
      : JSON.stringify(message.content ?? "").length;
  }
  return Math.ceil(chars / 4) + 4 * prompt.messages.length;
}

function promptBatchExtra(request: ParsedRequest): number {
  return request.prompt.kind === "chat" ? 0 : request.prompt.extraPromptCount;
}
