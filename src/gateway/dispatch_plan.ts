import type { DecodePlan, DispatchPlan, TokenSource } from "../contracts.ts";
import type { ExtraKeys, HashedPrompt, KeySchemeOptions } from "../hashing/types.ts";
import { withLatestPredictions } from "../kv/merged_index.ts";
import { computePrefixHits, withEngineHits } from "../kv/prefix.ts";
import { crossCheck, mirrorLookup } from "../kv/events/pool_mirror.ts";
import type { LookupResult, PrefixHits } from "../kv/types.ts";
import { sequencesOf } from "../openai/engine_batch.ts";
import type { ParsedRequest, PromptInput } from "../openai/request.ts";
import { type AdmissionVerdict, admit } from "../scheduling/admission.ts";
import { admitLocalPrefill } from "../scheduling/local_prefill.ts";
import { withHomeKey } from "../scheduling/prefix_home.ts";
import { DEFAULT_DECODE_MODEL, predictTbtS } from "../scheduling/decode_model.ts";
import type { NamedPolicy } from "../scheduling/named_policy.ts";
import { choosePrefill } from "../scheduling/prefill_choice.ts";
import { type DecisionInputs, recordingContext } from "../scheduling/decision_replay.ts";
import type { DecodeCandidate } from "../scheduling/decode_policy.ts";
import type { Candidate, Decision } from "../scheduling/types.ts";
import { TokenizeInputError } from "../tokenize/errors.ts";
import { chatInputSize } from "../tokenize/input_size.ts";
import { tryTokenize } from "../tokenize/try_tokenize.ts";
import type { ModelRuntime } from "../runtime/model_runtime.ts";
import { poolLoadsOf } from "../config/pool_loads.ts";
import { planDecode, planLocalPrefill, splitByRole } from "./pd_plan.ts";
import type { TtftModelParams } from "../scheduling/ttft_estimate.ts";
import {
  type Reservation,
  reserveDecode,
  reserveFirstChoice,
  reserveLocalPrefill,
} from "./reservation.ts";

export interface PlanContext {
  now: () => number;
  random: () => number;
  policy: NamedPolicy;
  extraKeys?: ExtraKeys;
  /** Once the prompt's tokens are known, before any hashing or lookup: may throw to refuse it. */
  checkPrompt?: (prompt: { tokens?: number[]; promptTokens: number }) => void;
  /** Only these instances may take the request (a route they serve, a LoRA they hold). */
  eligible?: (instanceId: string) => boolean;
  /** Sent whole to one instance even on a disaggregated model (a load-routed request). */
  whole?: boolean;
  /**
   * Reserve only a plan this accepts (called in the decision's synchronous step): a request late
   * binding holds, or a waiting request's re-plan that stays, must leave no lease and no recorded
   * prefill size behind.
   */
  reserveIf?: (plan: DispatchPlan) => boolean;
  /** Hashes a long prompt's keys off the main loop (request_worker_pool.ts); absent: inline. */
  hashKeys?: (
    scheme: KeySchemeOptions,
    tokens: readonly number[],
    extra?: ExtraKeys,
  ) => Promise<HashedPrompt>;
}

/** Prompts up to this many tokens are hashed inline (about a millisecond of SHA-256). */
export const HASH_INLINE_MAX_TOKENS = 32_768;

/**
 * A plan and, when admitted, the reservation on its first choice and (disaggregated) on its
 * decode instance: the caller owns both.
 */
export interface PlannedDispatch {
  plan: DispatchPlan;
  reservation?: Reservation;
  decodeReservation?: Reservation;
}

export interface Tokenized {
  tokens?: number[];
  promptTokens: number;
  source: TokenSource;
  error?: string;
}

interface Scheduled {
  hits: PrefixHits;
  /** The policy's candidates (for a disaggregated model: the prefill side). */
  candidates: Candidate[];
  /** A disaggregated model's decode instances. */
  decodeCandidates?: DecodeCandidate[];
  /** The same instances as prefill candidates (for a prefill of their own). */
  decodeAsPrefill?: Candidate[];
  entries: DispatchPlan["entries"];
  poolPrefixTokens: number;
  decision: Decision;
  /** The policy's TTFT for its first choice, else the TTFT model's. */
  predictedTtftS?: number;
  kvLoadOnly?: string;
  /** What the decision was made from, to replay it (src/scheduling/decision_replay.ts). */
  inputs: DecisionInputs;
}

/** The prompt's tokens and keys: what a re-plan of the same request reuses (flow_control.ts). */
export interface PreparedPrompt {
  /** The runtime the keys were made for: after a reload with another, prepare again. */
  runtime: ModelRuntime;
  tokenized: Tokenized;
  hashed: HashedPrompt & { error?: string };
  tokenizeStart: number;
  hashStart: number;
  hashEnd: number;
}

/**
 * tokenize → chunk keys → store lookup → candidates → policy → admission → reservation. Never
 * throws for tokenizer or store trouble: those degrade to load-only dispatch. Everything after
 * the store lookup runs in one synchronous step, so a burst's decisions see each other.
 */
export async function planDispatch(
  runtime: ModelRuntime,
  request: ParsedRequest,
  context: PlanContext,
): Promise<PlannedDispatch & { prepared: PreparedPrompt }> {
  const prepared = await preparePrompt(runtime, request, context);
  return { ...await decideDispatch(prepared, request, context), prepared };
}

/** Tokenizes and hashes the prompt (checked by `context.checkPrompt` in between). */
export async function preparePrompt(
  runtime: ModelRuntime,
  request: ParsedRequest,
  context: PlanContext,
): Promise<PreparedPrompt> {
  const tokenizeStart = context.now();
  const tokenized = await tokenize(runtime, request);
  context.checkPrompt?.(tokenized);
  const hashStart = context.now();
  const hashed = await chunkKeysOf(runtime, tokenized.tokens, context);
  return { runtime, tokenized, hashed, tokenizeStart, hashStart, hashEnd: context.now() };
}

/** Looks the prepared prompt's keys up, decides, admits and reserves: a plan, again if need be. */
export async function decideDispatch(
  prepared: PreparedPrompt,
  request: ParsedRequest,
  context: PlanContext,
): Promise<PlannedDispatch> {
  const { now } = context;
  const { runtime, tokenized, tokenizeStart, hashStart } = prepared;
  const { chunkKeys, blockHashes, error: keysError } = prepared.hashed;
  const keys = chunkKeys.flat();
  const lookupStart = now();
  const stored = await storeLookup(runtime, keys, context.random);
  // From here to the reservation nothing awaits: the router's own recent dispatches are read
  // in the same synchronous step as this decision and its reservation, so that a burst's
  // requests see each other.
  const lookup = stored && runtime.predicted
    ? withLatestPredictions(stored, keys, runtime.predicted)
    : stored;
  const scheduleStart = now();
  const engineHits = runtime.engineCaches.prefixes(blockHashes);
  const scheduled = schedule(
    runtime,
    chunkKeys,
    lookup,
    engineHits,
    tokenized.promptTokens,
    context,
  );
  const admissionStart = now();
  const { admission, predictedTtftS, decode } = admitRequest(
    runtime,
    scheduled,
    context.policy.ttftParams,
  );
  const end = now();
  const { decodeCandidates: _decode, decodeAsPrefill: _asPrefill, ...chosen } = scheduled;
  const plan: DispatchPlan = {
    tokens: tokenized.tokens,
    promptTokens: tokenized.promptTokens,
    sequences: sequencesOf(request.body),
    tokenSource: tokenized.source,
    tokenizeError: tokenized.error,
    chunkKeys,
    keys,
    keysError,
    lookup,
    ...chosen,
    policy: context.policy,
    admission,
    predictedTtftS,
    decode,
    timings: {
      tokenizeMs: hashStart - tokenizeStart,
      // A re-plan after a wait reuses the hashing: its time is the hashing's, not the wait's.
      hashMs: prepared.hashEnd - hashStart,
      lookupMs: scheduleStart - lookupStart,
      scheduleMs: end - scheduleStart,
    },
    stages: { tokenizeStart, hashStart, lookupStart, scheduleStart, admissionStart, end },
  };
  if (context.reserveIf && !context.reserveIf(plan)) return { plan };
  if (decode?.localPrefill?.local) {
    return { plan, reservation: reserveLocalPrefill(runtime, plan, end) };
  }
  return {
    plan,
    reservation: reserveFirstChoice(runtime, plan, end),
    decodeReservation: reserveDecode(runtime, plan, end),
  };
}

/**
 * Store keys per chunk, when the prompt is long enough and there is an index to ask; a long
 * prompt's on a worker. A request whose extra keys (LoRA, cache_salt) the model's hash cannot
 * express, or whose hashing failed, is dispatched by load: no reason to fail it.
 */
async function chunkKeysOf(
  runtime: ModelRuntime,
  tokens: number[] | undefined,
  context: PlanContext,
): Promise<HashedPrompt & { error?: string }> {
  const lookupEnabled = runtime.store !== undefined || runtime.predicted !== undefined ||
    runtime.engineCaches.size > 0;
  if (!tokens || tokens.length < runtime.config.kv.minPromptTokens || !lookupEnabled) {
    return { chunkKeys: [], blockHashes: [] };
  }
  const { extraKeys, hashKeys } = context;
  try {
    if (hashKeys && tokens.length > HASH_INLINE_MAX_TOKENS) {
      return await hashKeys(runtime.keyScheme.options, tokens, extraKeys);
    }
    return runtime.keyScheme.hashed(tokens, extraKeys);
  } catch (error) {
    return { chunkKeys: [], blockHashes: [], error: (error as Error).message };
  }
}

/**
 * The store's answer (health-gated, deadline-bound), before the router's predictions. While the
 * mirror of the master's KV events is exact it answers instead, and a sampled share of requests
 * is also looked up to count where the two disagree (the master's answer is the one used).
 */
async function storeLookup(
  runtime: ModelRuntime,
  keys: string[],
  random: () => number,
): Promise<LookupResult | undefined> {
  if (keys.length === 0) return undefined;
  if (!runtime.store) return noStoreLookup(keys);
  const lookup = () => runtime.store!.lookup(keys, { deadlineMs: runtime.config.kv.timeoutMs });
  const mirror = runtime.poolMirror;
  if (mirror?.state !== "exact") return await lookup();
  const mirrored = mirrorLookup(mirror, keys);
  if (random() >= (runtime.config.kv.masterEvents?.crossCheckRate ?? 0)) {
    mirror.lookups.answered++;
    return mirrored;
  }
  const stored = await lookup();
  crossCheck(mirror, mirrored, stored);
  return stored;
}

/**
 * Prefix hits per instance, the candidates with their load, and the policy's decision. An
 * engine whose own cache is mirrored from its KV events (`engineHits`, exact mirrors only) counts
 * the larger of that and what the store and the router's dispatches say it holds.
 */
function schedule(
  runtime: ModelRuntime,
  chunkKeys: string[][],
  lookup: LookupResult | undefined,
  engineHits: ReadonlyMap<string, number>,
  promptTokens: number,
  context: PlanContext,
): Scheduled {
  const stored = lookup
    ? computePrefixHits(
      chunkKeys,
      lookup.locations,
      runtime.cluster.entries().map((e) => ({ id: e.config.id, kvHost: e.config.kvHost })),
    )
    : { poolChunks: 0, localChunks: new Map<string, number>() };
  const hits = withEngineHits(stored, engineHits);
  const cap = (chunks: number) => Math.min(promptTokens, chunks * runtime.config.kv.chunkSize);
  const { candidates: all, entries } = runtime.cluster.candidates((id) =>
    cap(hits.localChunks.get(id) ?? 0)
  );
  const eligible = context.eligible;
  const candidates = (eligible ? all.filter((c) => eligible(c.id)) : all).map((candidate) => {
    const estimator = runtime.prefillEstimators.get(candidate.id);
    return estimator && estimator.sampleCount > 0
      ? { ...candidate, prefillModel: estimator.model() }
      : candidate;
  });
  const kvLoadOnly = loadOnlyReason(runtime);
  // Load-only: the policy sees no hits; `hits` keeps the prediction for the agreement monitor.
  const poolPrefixTokens = kvLoadOnly ? 0 : cap(hits.poolChunks);
  const seen = kvLoadOnly ? candidates.map((c) => ({ ...c, localPrefixTokens: 0 })) : candidates;
  const entryMap = new Map(entries.map((e) => [e.config.id, e]));
  const { prefillSide, decode, decodeAsPrefill } = context.whole
    ? { prefillSide: seen, decode: undefined, decodeAsPrefill: undefined }
    : splitByRole(runtime, seen, entryMap);
  // The router cannot make an engine load the pool's part of a prefix: a policy is told engines
  // load it only when they do so by themselves (`kv.poolLoads`; the simulator's replays, which
  // can make them, share this step: src/scheduling/prefill_choice.ts).
  const plain = { promptTokens, poolPrefixTokens };
  const request = prefixesKnown(runtime, lookup, kvLoadOnly)
    ? withHomeKey(plain, prefillSide, (index) => chunkKeys[index]?.[0], runtime.config.kv.chunkSize)
    : plain;
  const recording = recordingContext(context.random, runtime.sequence++);
  const poolUse = poolLoadsOf(runtime.config.kv) ? "always" : "never";
  const choice = choosePrefill(request, prefillSide, context.policy.policy, recording.context, {
    ttft: context.policy.ttftParams,
    poolUse,
  });
  const { sequence } = recording.context;
  return {
    hits,
    candidates: prefillSide,
    decodeCandidates: decode,
    decodeAsPrefill,
    entries: entryMap,
    poolPrefixTokens,
    decision: choice.decision,
    predictedTtftS: choice.predictedTtftS,
    ...(kvLoadOnly ? { kvLoadOnly } : {}),
    inputs: {
      request,
      candidates: prefillSide,
      sequence,
      draws: recording.draws,
      ...(poolUse === "never" ? {} : { poolUse }),
    },
  };
}

/**
 * Whether the hits are whole, so the first unheld chunk is the prompt's new part and may be given
 * a home (src/scheduling/prefix_home.ts): not while dispatching by load, nor after a lookup that
 * failed, timed out or was skipped with the store down. There every prompt would look new, and a
 * shared system prompt would send every request to its one home.
 */
function prefixesKnown(
  runtime: ModelRuntime,
  lookup: LookupResult | undefined,
  kvLoadOnly: string | undefined,
): boolean {
  if (kvLoadOnly || !lookup) return false;
  if (lookup.outcome === "ok" || lookup.outcome === "mirror") return true;
  return lookup.outcome === "skipped" && !runtime.store;
}

/**
 * With `kv.onDisagreement: "load_only"`, why the model is dispatched by load alone right now
 * (an instance is `blind`: the router's hits cannot be trusted); undefined when it is not.
 */
function loadOnlyReason(runtime: ModelRuntime): string | undefined {
  if (runtime.config.kv.onDisagreement !== "load_only") return undefined;
  const blind = runtime.agreement.blindInstances();
  return blind.length > 0 ? `kv_blind: ${blind.join(", ")}` : undefined;
}

/**
 * The SLO verdict on the best candidate (TTFT) and the decode side (TBT); for a disaggregated
 * request whose best candidate is a prefill instance, also the decode choice.
 */
function admitRequest(
  runtime: ModelRuntime,
  scheduled: Scheduled,
  ttft: TtftModelParams,
): { admission: AdmissionVerdict; predictedTtftS?: number; decode?: DecodePlan } {
  const { decision, candidates, predictedTtftS } = scheduled;
  const best = candidates.find((c) => c.id === decision.ranking[0]);
  const prefillRole = best && scheduled.entries.get(best.id)?.config.role === "prefill";
  if (scheduled.decodeCandidates && (prefillRole || !best)) {
    const pd = planDecode(runtime, scheduled.decodeCandidates, {
      prefillId: best?.id,
      predictedTtftS,
      promptTokens: scheduled.inputs.request.promptTokens,
    });
    const local = planLocalPrefill(runtime.config, pd.decode, scheduled.decodeAsPrefill ?? [], {
      promptTokens: scheduled.inputs.request.promptTokens,
      remoteTtftS: best ? predictedTtftS : undefined,
      ttft,
      pool: { prefixTokens: scheduled.poolPrefixTokens, loads: poolLoadsOf(runtime.config.kv) },
    });
    if (!local) return { ...pd, predictedTtftS };
    pd.decode.localPrefill = local;
    // Prefilled where it decodes: judged, and predicted, on the local plan.
    return {
      decode: pd.decode,
      admission: admitLocalPrefill(pd.admission, local, runtime.config.slo.ttftS),
      predictedTtftS: local.local ? local.localTtftS ?? predictedTtftS : predictedTtftS,
    };
  }
  const slo = runtime.config.slo;
  const running = candidates.filter((c) => c.healthy).map((c) => c.runningRequests);
  const admission = admit(
    {
      predictedTtftS,
      predictedTbtS: slo.tbtS === undefined
        ? undefined
        : predictTbtS(DEFAULT_DECODE_MODEL, running),
      instanceId: best?.id,
    },
    { enabled: slo.admission, ttftSloS: slo.ttftS, tbtSloS: slo.tbtS },
  );
  return { admission, predictedTtftS };
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

async function tokenize(runtime: ModelRuntime, request: ParsedRequest): Promise<Tokenized> {
  const prompt = request.prompt;
  const withPromptTokens = (
    outcome: { tokens?: number[]; source: TokenSource; error?: string },
  ): Tokenized => ({ ...outcome, promptTokens: promptTokensOf(prompt, outcome.tokens) });
  if (prompt.kind === "tokens") {
    return withPromptTokens({ tokens: prompt.tokens, source: "token_ids" });
  }
  if (prompt.kind === "opaque") return withPromptTokens({ source: "not_read" });
  try {
    const outcome = await tryTokenize(
      prompt.kind === "text"
        ? runtime.tokenizer.encode(prompt.text, { addSpecialTokens: true }).then((tokens) =>
          // A batch's shared text may end inside a word its prompts go on to tokenize otherwise.
          prompt.extraPromptCount > 0 ? tokens.slice(0, -1) : tokens
        )
        : runtime.tokenizer.encodeChat(prompt.messages, {
          tools: prompt.tools,
          documents: prompt.documents,
          chatTemplateKwargs: prompt.chatTemplateKwargs,
        }),
    );
    if (outcome.ok) return withPromptTokens({ tokens: outcome.tokens, source: "tokenized" });
    return withPromptTokens({ source: outcome.reason, error: outcome.error.message });
  } catch (error) {
    const message = (error as Error).message;
    // The engine, not the router, is the authority on what it accepts (its template may differ,
    // it may take images): forward the request by load and let the engine answer.
    if (error instanceof TokenizeInputError) {
      return withPromptTokens({ source: "input_error", error: message });
    }
    runtime.tokenizerFailures.record(
      runtime.tokenizer.mode,
      prompt.kind === "text" ? "text" : "chat",
      error as Error,
    );
    return withPromptTokens({ source: "failed", error: message });
  }
}

/**
 * The prefill work of a prompt, in tokens: its tokens when known, else ~4 characters a token. A
 * batch counts every prompt: its token ids exactly, its texts as the shared prefix's tokens for
 * each prompt plus ~4 characters a token for the rest.
 */
export function promptTokensOf(prompt: PromptInput, tokens: readonly number[] | undefined): number {
  if (prompt.kind === "tokens") return prompt.batchSize ?? prompt.tokens.length;
  if (prompt.kind === "opaque") return Math.ceil(prompt.chars / 4);
  if (prompt.kind === "chat") {
    return tokens?.length ??
      Math.ceil(chatInputSize(prompt.messages, prompt) / 4) + 4 * prompt.messages.length;
  }
  const copies = 1 + prompt.extraPromptCount;
  const total = prompt.batchSize ?? prompt.text.length;
  if (!tokens) return Math.ceil(total / 4);
  return tokens.length * copies + Math.ceil((total - prompt.text.length * copies) / 4);
}

/**
 * What the queue's admission judges of a plan (src/scheduling/queue_rules.ts `admitsFromQueue`):
 * its predicted TTFT and the prefill waiting on the instance chosen to prefill it, as seen before
 * its own reservation (none judged for a local prefill on the decode instance).
 */
export function chosenPrefill(
  plan: DispatchPlan,
): { predictedTtftS: number | undefined; waitingPrefillTokens: number | undefined } {
  const chosen = plan.decode?.localPrefill?.local
    ? undefined
    : plan.candidates.find((c) => c.id === plan.decision.ranking[0]);
  return {
    predictedTtftS: plan.predictedTtftS,
    waitingPrefillTokens: chosen?.waitingPrefillTokens,
  };
}
