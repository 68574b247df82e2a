/**
 * Prefill/decode disaggregation in the simulator (the Mooncake paper's §6-§8 setting): N prefill
 * and M decode instances, or N neutral ones that do both. The router part of each step is the
 * production code: the prefix lookup, the load account, the policy (`createPolicy`), the decode
 * choice (`selectDecode`), the admission (`admitPd`) and the decode outlook that feeds it
 * (src/cluster/decode_outlook.ts). Only time, the engines and the baseline's decode-time judgment
 * are the simulator's.
 */
import { LoadAccount, type LoadLease } from "../cluster/load_account.ts";
import { DecodeOutlook } from "../cluster/decode_outlook.ts";
import type { KvPlacement } from "../kv/prefix.ts";
import type { AdmissionRefusal, AdmissionVerdict } from "../scheduling/admission.ts";
import { admitLocalPrefill } from "../scheduling/local_prefill.ts";
import { type DecodeModel, decodeStepS } from "../scheduling/decode_model.ts";
import {
  type DecodeCandidate,
  type DecodePolicyName,
  selectDecode,
} from "../scheduling/decode_policy.ts";
import {
  admitPd,
  type DecodeLoadForecast,
  type DecodeLoadScope,
  type EarlyRejection,
  poolForecast,
  withReportedKv,
} from "../scheduling/pd_admission.ts";
import { PrefillModelEstimator } from "../scheduling/prefill_model.ts";
import { createPolicy, paramsFor } from "../scheduling/registry.ts";
import { estimateQueueS } from "../scheduling/ttft_estimate.ts";
import { choosePrefill } from "../scheduling/prefill_choice.ts";
import type { Candidate, Decision, Policy, ScheduleRequest } from "../scheduling/types.ts";
import { type DecodeJob, SimDecodeEngine } from "./decode_engine.ts";
import {
  decodeAsPrefillCandidate,
  decodeSideEngines,
  heldPrefixTokens,
  keepArrivedPrefix,
  type LocalPrefillSetting,
  localPrefillVerdict,
  redundantPrefillTokens,
} from "./decode_prefill.ts";
import { EventQueue } from "./event_queue.ts";
import { admitsAfterWait, SimQueue, type SimQueueConfig } from "./sim_queue.ts";
import { idleTtftS, worthQueueing } from "../scheduling/queue_rules.ts";
import { QueueSchema } from "../config/schema.ts";
import { GapHistogram } from "./gap_histogram.ts";
import { lookupPrefix, poolPrefixLength } from "./lookup.ts";
import { SimNeutralEngine } from "./neutral_engine.ts";
import { newPrefillJob, type PrefillJob, type SimPrefillEngine } from "./prefill_engine.ts";
import { seededRandom } from "./rng.ts";
import { simScheduleRequest } from "./schedule_request.ts";
import { poolUseOf, prefillEngines, type SimConfig } from "./simulator.ts";
import type { TraceRequest } from "./trace.ts";

/** The router's re-plan period for waiting requests (`slo.queue.recheckMs`'s default). */
const RECHECK_S = QueueSchema.parse({}).recheckMs / 1000;

/**
 * When a request may be refused:
 * - `off`: no admission (the decode instance is still chosen at arrival, as the router does; when
 *   every decode instance's KV cache is full there is none to choose: `no_decode_instance`);
 * - `baseline`: the TTFT SLO at arrival; the decode instance chosen then judges its side only once
 *   the prefill is done, and a refusal wastes the prefill;
 * - `early` / `predicted` / `committed`: `admitPd` at arrival judges both sides (decode load now,
 *   forecast to the end of the prefill, or every request bound for the instance; the pool's mean
 *   or the chosen instance's, `decodeLoad`); an admitted
 *   request is decoded, waiting for a place in the batch when the decode instance is full
 *   (`decodeMaxBatch`).
 */
export type PdAdmission = "off" | "baseline" | EarlyRejection;
export const PD_ADMISSIONS: readonly PdAdmission[] = [
  "off",
  "baseline",
  "early",
  "predicted",
  "committed",
];

export type PdTopology =
  | { kind: "pd"; prefill: number; decode: number }
  | { kind: "neutral"; instances: number; chunked: boolean; chunkTokens?: number };

export interface PdConfig extends
  Pick<
    SimConfig,
    | "cacheBlocks"
    | "chunkTokens"
    | "blockTokens"
    | "speed"
    | "seed"
    | "sloTtftS"
    | "sloTbtS"
    | "kvPool"
    | "ttft"
    | "engineModel"
    | "heterogeneity"
    | "refine"
    | "loadFilterTokens"
    | "timelinePoints"
  > {
  /** The engines' true decode step, KV term included. */
  engineDecodeModel: DecodeModel;
  /** The router's decode model (selectDecode, admitPd, the decode-time judgment). */
  routerDecodeModel: DecodeModel;
  decodePolicy: DecodePolicyName;
  /** KV tokens one decode instance holds (its GPU memory less the weights). */
  decodeKvCapacityTokens: number;
  /** Bandwidth of the prefill → decode KV transfer, bytes per second. */
  pdTransferBytesPerS: number;
  /** The router's first guess of a decode's duration (its `meanDecodeS`, learned from then on). */
  meanDecodeS: number;
  /**
   * Most requests a decode instance batches (`max_num_seqs`, sized to the TBT SLO); the rest wait
   * (default: no limit). Neutral instances are not capped.
   */
  decodeMaxBatch?: number;
}

export interface PdRun {
  label: string;
  policy: string;
  topology: PdTopology;
  admission: PdAdmission;
  /** Whose decode load `early`, `predicted` and `committed` judge at arrival (`decodeLoad`). */
  decodeLoad?: DecodeLoadScope;
  /** Conditional disaggregation (P/D only, docs/sim/pd/README.md); absent: local prefill off. */
  localPrefill?: LocalPrefillSetting;
  /**
   * What the router's decode judgments know of KV: `guess` (the decode model's tokens per
   * request, as before); `prompt` (the request's own prompt, the batch at the guess, the engines'
   * batch cap); `reported` (that, with the batch at each decode engine's own KV per request).
   */
  decodeKv?: DecodeKvView;
  /**
   * The flow-control queue (src/sim/sim_queue.ts, the router's rules): a request admission
   * refuses at arrival waits while an idle instance could still serve it within the TTFT SLO,
   * and goes once a re-plan admits it. Absent: refused at once. Not with local prefill.
   */
  queue?: SimQueueConfig;
}

export const DECODE_KV_VIEWS = ["guess", "prompt", "reported"] as const;
export type DecodeKvView = typeof DECODE_KV_VIEWS[number];

export interface PdResult {
  label: string;
  policy: string;
  admission: PdAdmission;
  decodeLoad?: DecodeLoadScope;
  localPrefill?: LocalPrefillSetting;
  decodeKv?: DecodeKvView;
  topology: PdTopology;
  /** Prefill-side instances (prefill or neutral). */
  instanceNames: string[];
  decodeNames: string[];
  /** Per request, in trace order; NaN where rejected (before or after the prefill). */
  ttftS: Float64Array;
  predictedTtftS: Float64Array;
  /** (last token − first token) / (output − 1); NaN without decode tokens. */
  tpotS: Float64Array;
  promptTokens: Float64Array;
  reusedTokens: Float64Array;
  transferTokens: Float64Array;
  /** Prefill-side instance; −1 when refused before the prefill or prefilled locally. */
  instance: Int32Array;
  /** Decode instance (P/D), −1 when none. */
  decodeInstance: Int32Array;
  rejectedByReason: Record<string, number>;
  /** With the queue: per request, seconds waited in it; NaN when it never waited. */
  queueWaitS?: Float64Array;
  /** Refusals after a completed prefill (the baseline's). */
  rejectedAfterPrefill: number;
  /** Prompt tokens computed for requests refused afterwards. */
  wastedPrefillTokens: number;
  /**
   * Prompt tokens a prefill instance computed that the request's decode instance already held at
   * arrival (served requests only: a refused one counts in `wastedPrefillTokens`).
   */
  redundantPrefillTokens: number;
  /** Requests prefilled on their decode instance (conditional disaggregation). */
  localPrefills: number;
  /** The last arrival, seconds (the span goodput is measured over). */
  lastArrivalS: number;
  /** Every inter-token gap of every served request. */
  tbt: GapHistogram;
  /** Waiting prefill tokens per prefill-side instance (the router's account), sampled. */
  timeline: { periodS: number; waitingTokens: number[][] };
  /**
   * Pool loads relative to their SLO, sampled every `periodS`: prefill = mean queued prefill
   * seconds (the router's model over its account) / TTFT SLO; decode = mean over the decode
   * instances of (step time with their batch now − the fixed step cost) / (TBT SLO − that cost),
   * 0 when idle, 1 at the SLO (the batch's requests waiting for a place count); rejected =
   * refusals in the period.
   */
  load: { periodS: number; prefill: number[]; decode: number[]; rejected: number[] };
  busyS: number[];
  evictions: number;
  /**
   * KV tokens per request of the decode batches (each busy decode engine's, at each sample), summed
   * with their count: what a running batch holds against the trace's mean context.
   */
  batchKv: { sum: number; count: number };
  exampleDecision?: Decision;
  endS: number;
}

type PdEvent =
  | { kind: "prefill"; engine: number }
  | { kind: "decode"; engine: number }
  | { kind: "neutral"; engine: number }
  | { kind: "join"; engine: number; job: DecodeJob; hashIds: readonly number[] }
  | { kind: "recheck" }
  | { kind: "tick" };

/** Replays `trace` through one policy and admission mode on a P/D or neutral cluster. */
export function simulatePd(
  trace: readonly TraceRequest[],
  config: PdConfig,
  run: PdRun,
): PdResult {
  return new PdReplay(trace, config, run).replay();
}

/** The router's prefill-side choice for one request (`#planPrefill`). */
interface PrefillPlan {
  prefillId: string;
  /** Index of `prefillId` among the prefill-side engines. */
  engine: number;
  /** Whether the prefix is fetched from the pool (per `kvPool` and the plan). */
  usePool: boolean;
  /** Prompt tokens the estimate reuses (not leased as prefill work). */
  reusedTokens: number;
  predictedTtftS: number;
  /** What the policy judged: for the queue's idle estimate and its admission after a wait. */
  request: ScheduleRequest;
  candidates: Candidate[];
}

interface DecodeSlot {
  engine: number;
  lease: LoadLease;
  /** Withdraws the request from the outlook's joining ones (the router's `arrived`). */
  arrived: () => void;
}

class PdReplay {
  readonly #trace: readonly TraceRequest[];
  readonly #config: PdConfig;
  readonly #run: PdRun;
  readonly #pd: boolean;
  readonly #policy: Policy;
  readonly #random: () => number;
  /** Re-plans from the queue draw from their own stream, so arrivals see the same draws. */
  readonly #replanRandom: () => number;
  #replanSequence = 0;
  readonly #queue?: SimQueue;
  /** Expiries and displacements already counted as refusals. */
  #queueOutSeen = { expired: 0, displaced: 0 };
  /** A periodic re-plan is scheduled (the router's `recheckMs` while anyone waits). */
  #tickArmed = false;
  readonly #account: LoadAccount;
  readonly #outlook: DecodeOutlook;
  readonly #names: string[];
  readonly #indexOf: Map<string, number>;
  /** Prefill-side engines (the neutral engines' prefill halves in the neutral topology). */
  readonly #prefill: SimPrefillEngine[];
  readonly #neutral: SimNeutralEngine[];
  readonly #decodeNames: string[];
  readonly #decodeIndexOf: Map<string, number>;
  readonly #decoders: SimDecodeEngine[];
  /** Each decode instance with its prefix cache and local prefill (decode_prefill.ts). */
  readonly #decodeSides: SimNeutralEngine[];
  /** Prompt tokens the chosen decode instance held at each request's last plan. */
  readonly #heldByDecode: Float64Array;
  /** Requests in transfer to each decoder and their KV tokens. */
  readonly #incoming: number[];
  readonly #incomingKv: number[];
  readonly #placements: KvPlacement[];
  readonly #estimators: PrefillModelEstimator[];
  readonly #result: PdResult;
  readonly #arrivalS: number[];
  readonly #prefillLeases: (LoadLease | undefined)[];
  readonly #decodeSlots: (DecodeSlot | undefined)[];
  readonly #firstTokenS: Float64Array;
  readonly #events = new EventQueue<PdEvent>();
  readonly #lastArrival: number;
  readonly #periodS: number;
  #nowS = 0;
  #nextSampleS = 0;
  #sequence = 0;
  #rejectedInPeriod = 0;

  constructor(trace: readonly TraceRequest[], config: PdConfig, run: PdRun) {
    const n = trace.length;
    const topology = run.topology;
    this.#trace = trace;
    this.#config = config;
    this.#run = run;
    this.#pd = topology.kind === "pd";
    this.#policy = createPolicy(
      run.policy,
      paramsFor(run.policy, { ...config.ttft, loadFilterTokens: config.loadFilterTokens }),
    );
    this.#random = seededRandom(config.seed);
    this.#replanRandom = seededRandom(config.seed ^ 0x51ed);
    if (run.queue) {
      if (run.localPrefill && run.localPrefill.mode !== "off") {
        throw new Error("the P/D simulator does not model the queue with local prefill");
      }
      this.#queue = new SimQueue(n, run.queue, config.sloTtftS);
    }
    const nowMs = () => this.#nowS * 1000;
    this.#account = new LoadAccount({ now: nowMs, expireAfterMs: Number.POSITIVE_INFINITY });
    this.#outlook = new DecodeOutlook({ meanDecodeS: config.meanDecodeS, now: nowMs });
    const tbt = new GapHistogram();
    const poolPrefix = (blocks: readonly number[]) => poolPrefixLength(this.#prefill, blocks);
    const engines = buildEngines(
      topology,
      config,
      (gapS) => tbt.add(gapS),
      poolPrefix,
      run.localPrefill?.chunkTokens,
    );
    this.#names = engines.names;
    this.#prefill = engines.prefill;
    this.#neutral = engines.neutral;
    this.#decodeNames = engines.decodeNames;
    this.#decoders = engines.decoders;
    this.#decodeSides = engines.decodeSides;
    this.#heldByDecode = new Float64Array(n);
    this.#indexOf = new Map(this.#names.map((name, i) => [name, i]));
    this.#decodeIndexOf = new Map(this.#decodeNames.map((name, i) => [name, i]));
    this.#incoming = this.#decoders.map(() => 0);
    this.#incomingKv = this.#decoders.map(() => 0);
    this.#placements = this.#names.map((name) => ({ id: name, kvHost: name }));
    this.#estimators = this.#names.map(() => new PrefillModelEstimator(config.ttft.prefillModel));
    this.#arrivalS = trace.map((r) => r.timestampMs / 1000 / config.speed);
    this.#prefillLeases = new Array(n);
    this.#decodeSlots = new Array(n);
    this.#firstTokenS = new Float64Array(n).fill(NaN);
    this.#lastArrival = n > 0 ? this.#arrivalS[n - 1] : 0;
    this.#periodS = Math.max(this.#lastArrival / Math.max(1, config.timelinePoints), 1e-3);
    this.#result = emptyResult(run, engines, n, tbt, this.#periodS);
    this.#result.lastArrivalS = this.#lastArrival;
  }

  replay(): PdResult {
    const n = this.#trace.length;
    const events = this.#events;
    let next = 0;
    // The last arrival or engine event: a stale queue deadline or re-plan does not end the run.
    let endS = 0;
    while (next < n || events.size > 0) {
      const eventS = events.peekTime();
      const arriveS = next < n ? this.#arrivalS[next] : Number.POSITIVE_INFINITY;
      this.#sample(Math.min(eventS, arriveS));
      if (eventS <= arriveS) {
        const event = events.pop()!;
        this.#nowS = event.time;
        this.#handle(event.value);
        if (event.value.kind !== "recheck" && event.value.kind !== "tick") endS = this.#nowS;
      } else {
        this.#nowS = endS = arriveS;
        this.#dispatch(next++);
      }
    }
    const result = this.#result;
    // Refusals after the last sample (at the last arrival) go to it.
    const rejected = result.load.rejected;
    if (rejected.length > 0) rejected[rejected.length - 1] += this.#rejectedInPeriod;
    result.endS = endS;
    result.busyS = this.#prefill.map((e) => e.busyS);
    result.evictions = this.#prefill.reduce((sum, e) => sum + e.cache.evictions, 0);
    if (this.#queue) result.queueWaitS = this.#queue.waitS;
    return result;
  }

  #handle(event: PdEvent): void {
    switch (event.kind) {
      case "prefill": {
        const finished = this.#prefill[event.engine].finishIteration();
        for (const job of finished) this.#finishPrefill(event.engine, job);
        this.#startPrefill(event.engine);
        // A prefill's end frees its instance (and, for a refused one, its decode slot).
        if (finished.length > 0) this.#pumpQueue();
        return;
      }
      case "decode": {
        const { prefilled, decoded } = this.#decodeSides[event.engine].finish(this.#nowS);
        for (const job of prefilled) this.#finishLocalPrefill(event.engine, job);
        for (const job of decoded) this.#decoded(job);
        this.#startDecode(event.engine);
        if (prefilled.length + decoded.length > 0) this.#pumpQueue();
        return;
      }
      case "neutral": {
        const { prefilled, decoded } = this.#neutral[event.engine].finish(this.#nowS);
        for (const job of prefilled) this.#finishPrefill(event.engine, job);
        for (const job of decoded) this.#decoded(job);
        this.#startNeutral(event.engine);
        if (prefilled.length + decoded.length > 0) this.#pumpQueue();
        return;
      }
      case "recheck":
        return this.#pumpQueue();
      case "tick":
        this.#tickArmed = false;
        this.#pumpQueue();
        return this.#armTick();
      case "join": {
        const d = event.engine;
        this.#incoming[d]--;
        this.#incomingKv[d] -= event.job.contextTokens ?? 0;
        keepArrivedPrefix(this.#decodeSides[d], event.hashIds);
        this.#decoders[d].add(event.job);
        this.#startDecode(d);
        return;
      }
    }
  }

  #startPrefill(engine: number): void {
    if (!this.#pd) return this.#startNeutral(engine);
    const duration = this.#prefill[engine].startIteration(this.#nowS);
    if (duration !== undefined) {
      this.#events.push(this.#nowS + duration, { kind: "prefill", engine });
    }
  }

  #startDecode(engine: number): void {
    // A queued local prefill runs first, holding the batch's steps back (neutral_engine.ts).
    const duration = this.#decodeSides[engine].start(this.#nowS);
    if (duration !== undefined) {
      this.#events.push(this.#nowS + duration, { kind: "decode", engine });
    }
  }

  #startNeutral(engine: number): void {
    const duration = this.#neutral[engine].start(this.#nowS);
    if (duration !== undefined) {
      this.#events.push(this.#nowS + duration, { kind: "neutral", engine });
    }
  }

  /** Request `i` arrives: it is sent, waits in the queue (when the run has one) or is refused. */
  #dispatch(i: number): void {
    const prompt = this.#trace[i].inputLength;
    this.#result.promptTokens[i] = prompt;
    const refusal = this.#send(i, "arrival");
    if (refusal === undefined) return;
    if (!this.#queue || !refusal.mayWait) return this.#reject(refusal.reason);
    // At arrival only admission's refusals may wait ("queued" is a re-plan's answer).
    const refusedFor = refusal.reason as AdmissionRefusal["reason"];
    const deadline = this.#queue.push(
      { index: i, priority: 0, tenant: "all", promptTokens: prompt, refusedFor },
      this.#nowS,
    );
    if (deadline === undefined) return this.#reject("queue_full");
    this.#events.push(deadline, { kind: "recheck" });
    this.#armTick();
  }

  /**
   * While anyone waits, a re-plan every `recheckMs` as the router's queue does: between events
   * the decode forecast still moves with the clock (decode_outlook.ts).
   */
  #armTick(): void {
    if (this.#tickArmed || !this.#queue || this.#queue.size === 0) return;
    this.#tickArmed = true;
    this.#events.push(this.#nowS + RECHECK_S, { kind: "tick" });
  }

  /**
   * Re-plans the waiting requests in the queue's order (from scratch, as the router does), sends
   * those that fit, and counts the ones whose deadline passed (or a more urgent one displaced).
   */
  #pumpQueue(): void {
    const queue = this.#queue;
    if (!queue || queue.size === 0) return;
    queue.pump(
      this.#nowS,
      (i, waitedS, refusedFor) => this.#send(i, "replan", { waitedS, refusedFor }) === undefined,
    );
    const seen = this.#queueOutSeen;
    for (; seen.expired < queue.expired.length; seen.expired++) this.#reject("queue_timeout");
    for (; seen.displaced < queue.displaced.length; seen.displaced++) this.#reject("queue_full");
  }

  /**
   * Plans request `i` (lookup, prefill-side policy, decode choice, admission) and sends it;
   * otherwise why not, and whether it may wait (an idle instance could still serve it within the
   * TTFT SLO). From the queue (`waitedS`), it goes only once its TTFT fits what the wait left.
   */
  #send(
    i: number,
    kind: "arrival" | "replan",
    waited?: { waitedS: number; refusedFor: AdmissionRefusal["reason"] },
  ): { reason: string; mayWait: boolean } | undefined {
    const waitedS = waited?.waitedS;
    const request = this.#trace[i];
    const prompt = request.inputLength;
    const plan = this.#planPrefill(i, kind);
    // From arrival, as the TTFT is measured: a wait so far counts.
    this.#result.predictedTtftS[i] = (waitedS ?? 0) + plan.predictedTtftS;

    // The decode side, as the router plans it (pd_plan.ts): the pair is chosen at arrival.
    let decodeIds: string[] = [];
    if (this.#pd) {
      decodeIds = this.#rankDecode(i);
      if (decodeIds.length === 0) return { reason: "no_decode_instance", mayWait: false };
    }
    const decodeId: string | undefined = decodeIds[0];
    const verdict = this.#admitAtArrival(plan.predictedTtftS, plan.prefillId, decodeIds, prompt);
    // Prefilled where it decodes, a request is judged on the local plan (as the router does).
    const local = decodeId !== undefined &&
      this.#prefillLocally(i, decodeId, plan.predictedTtftS, verdict);
    if (local) return undefined;
    if (!verdict.admit) return { reason: verdict.reason, mayWait: this.#mayWait(plan) };
    if (waited && !this.#fitsAfterWait(plan, waited.waitedS, waited.refusedFor)) {
      return { reason: "queued", mayWait: true };
    }

    const k = plan.engine;
    this.#prefillLeases[i] = this.#account.lease(plan.prefillId, prompt - plan.reusedTokens);
    if (decodeId !== undefined) {
      this.#decodeSlots[i] = this.#takeDecodeSlot(decodeId, plan.predictedTtftS);
    }
    this.#result.instance[i] = k;
    this.#prefill[k].enqueue(newPrefillJob(i, prompt, request.hashIds, plan.usePool));
    this.#startPrefill(k);
    return undefined;
  }

  /** A refused request waits when the run has a queue and an idle instance could serve it in time. */
  #mayWait(plan: PrefillPlan): boolean {
    if (!this.#queue) return false;
    const idle = idleTtftS(plan.request, plan.candidates, this.#config.ttft);
    return worthQueueing(idle, this.#config.sloTtftS);
  }

  /** The queue's admission after a wait (src/scheduling/queue_rules.ts `admitsFromQueue`). */
  #fitsAfterWait(
    plan: PrefillPlan,
    waitedS: number,
    refusedFor: AdmissionRefusal["reason"],
  ): boolean {
    const chosen = { ...plan, chosenId: plan.prefillId };
    const { admitWhen } = this.#run.queue!;
    return admitsAfterWait(admitWhen, chosen, waitedS, this.#config.sloTtftS, refusedFor);
  }

  /**
   * The prefill side of request `i`, as the router decides it: the prefix lookup, the policy's
   * choice among the candidates, whether the pool is used, and the TTFT it predicts.
   */
  #planPrefill(i: number, kind: "arrival" | "replan"): PrefillPlan {
    const config = this.#config;
    const request = this.#trace[i];
    const prompt = request.inputLength;
    const hits = lookupPrefix(this.#prefill, this.#placements, request.hashIds);
    const tokens = (chunks: number) => Math.min(chunks * config.blockTokens, prompt);
    const candidates = this.#prefillCandidates((name) => tokens(hits.localChunks.get(name) ?? 0));
    const scheduleRequest = simScheduleRequest(request, hits, candidates, {
      blockTokens: config.blockTokens,
      poolOff: config.kvPool === "off",
    });
    const arrival = kind === "arrival";
    const choice = choosePrefill(scheduleRequest, candidates, this.#policy, {
      random: arrival ? this.#random : this.#replanRandom,
      sequence: arrival ? this.#sequence++ : this.#replanSequence++,
    }, { ttft: config.ttft, poolUse: poolUseOf(config.kvPool) });
    if (arrival) this.#keepExampleDecision(i, scheduleRequest, candidates, choice.decision);
    const prefillId = choice.decision.ranking[0];
    return {
      prefillId,
      engine: this.#indexOf.get(prefillId)!,
      usePool: choice.usePool,
      reusedTokens: choice.reusedTokens,
      predictedTtftS: choice.predictedTtftS!,
      request: scheduleRequest,
      candidates,
    };
  }

  /** The router's prefill candidates: its load account, and the learned model when refining. */
  #prefillCandidates(localPrefixTokens: (name: string) => number): Candidate[] {
    return this.#names.map((name, k): Candidate => {
      const load = this.#account.load(name);
      const candidate: Candidate = {
        id: name,
        healthy: true,
        localPrefixTokens: localPrefixTokens(name),
        waitingPrefillTokens: load.prefillTokens,
        waitingPrefillRequests: load.prefillRequests,
        runningRequests: load.decodeRequests,
      };
      if (this.#config.refine) candidate.prefillModel = this.#estimators[k].model();
      return candidate;
    });
  }

  /**
   * Keeps the first decision of the run's second half with a pool prefix and a queue somewhere:
   * one where the policy has something to weigh, for the results' example.
   */
  #keepExampleDecision(
    i: number,
    request: ScheduleRequest,
    candidates: readonly Candidate[],
    decision: Decision,
  ): void {
    const result = this.#result;
    if (
      result.exampleDecision === undefined && i >= this.#trace.length / 2 &&
      request.poolPrefixTokens > 0 && candidates.some((c) => c.waitingPrefillTokens > 0)
    ) result.exampleDecision = decision;
  }

  /**
   * The decode instances that can take request `i`, `selectDecode`'s choice first; with local
   * prefill on, ties go to the instance holding the longest prefix (as pd_plan.ts passes it).
   */
  #rankDecode(i: number): string[] {
    const candidates = this.#decodeCandidates();
    const local = this.#run.localPrefill;
    if (local && local.mode !== "off") {
      const { hashIds, inputLength } = this.#trace[i];
      candidates.forEach((c, d) => {
        c.prefixTokens = heldPrefixTokens(
          this.#decodeSides[d],
          hashIds,
          inputLength,
          this.#config.blockTokens,
        );
      });
    }
    return selectDecode(candidates, {
      model: this.#config.routerDecodeModel,
      policy: this.#config.decodePolicy,
    }).ranking;
  }

  /** The router's decode candidates: its own leases as running requests, the engines' KV use. */
  #decodeCandidates(): DecodeCandidate[] {
    return this.#decodeNames.map((name, d) => ({
      id: name,
      healthy: true,
      runningRequests: this.#account.load(name).decodeRequests,
      kvUsage: (this.#decoders[d].kvTokens + this.#incomingKv[d]) /
        this.#config.decodeKvCapacityTokens,
    }));
  }

  /** Admission at arrival; `decodeIds`: the decode instances that can take it, the chosen first. */
  #admitAtArrival(
    predictedTtftS: number,
    prefillId: string,
    decodeIds: readonly string[],
    prompt: number,
  ): AdmissionVerdict {
    const admission = this.#run.admission;
    if (admission === "off") return { admit: true };
    const config = this.#config;
    const { promptTokens, maxDecodeBatch } = this.#kvJudgment(prompt);
    const judgeDecode = admission !== "baseline" && decodeIds.length > 0;
    return admitPd({
      predictedTtftS,
      prefillInstanceId: prefillId,
      decode: judgeDecode
        ? { instanceId: decodeIds[0], forecast: this.#decodeForecast(decodeIds) }
        : undefined,
      promptTokens,
    }, {
      enabled: true,
      // The baseline judges only the TTFT here (no decode input); its mode is then unused.
      mode: admission === "baseline" ? "early" : admission,
      ttftSloS: config.sloTtftS,
      tbtSloS: config.sloTbtS,
      decodeModel: config.routerDecodeModel,
      maxDecodeBatch,
    }).verdict;
  }

  /**
   * The router's decode forecast (`decodeLoad`): over the instances that can take the request
   * (pd_plan.ts: an instance with a full KV cache cannot), or for the chosen one alone.
   */
  #decodeForecast(decodeIds: readonly string[]): DecodeLoadForecast {
    const forecastOf = (name: string): DecodeLoadForecast =>
      withReportedKv(
        this.#outlook.forecast(name, this.#account.load(name).decodeRequests),
        this.#reportedKvPerRequest(this.#decodeIndexOf.get(name)!),
      );
    return this.#run.decodeLoad === "pool"
      ? poolForecast(decodeIds.map(forecastOf))
      : forecastOf(decodeIds[0]);
  }

  /**
   * Conditional disaggregation: whether request `i` prefills on its decode instance (the
   * router's `decideLocalPrefill`, admitted on the local plan by `admitLocalPrefill`); if so,
   * leases it there and queues its prefill. Records what
   * the decode instance held either way (for the redundant-prefill count).
   */
  #prefillLocally(
    i: number,
    decodeId: string,
    remoteTtftS: number,
    admission: AdmissionVerdict,
  ): boolean {
    const d = this.#decodeIndexOf.get(decodeId)!;
    const { hashIds, inputLength: prompt } = this.#trace[i];
    const side = this.#decodeSides[d];
    const held = heldPrefixTokens(side, hashIds, prompt, this.#config.blockTokens);
    this.#heldByDecode[i] = held;
    const setting = this.#run.localPrefill;
    if (!setting || setting.mode === "off") return false;
    const candidate = decodeAsPrefillCandidate(decodeId, this.#account, held);
    const verdict = localPrefillVerdict(setting, candidate, {
      promptTokens: prompt,
      remoteTtftS,
    }, {
      ttft: this.#config.ttft,
      decodeModel: this.#config.routerDecodeModel,
      tbtSloS: this.#config.sloTbtS,
    });
    if (!verdict.local) return false;
    if (!admitLocalPrefill(admission, verdict, this.#config.sloTtftS).admit) return false;
    // The router's own prediction of the local prefill (what admission judged).
    const predictedS = verdict.localTtftS!;
    const lease = this.#account.lease(decodeId, verdict.uncachedTokens);
    const arrived = this.#outlook.expect(decodeId, (this.#nowS + predictedS) * 1000, {
      leasedAsDecode: false, // its lease counts it as prefilling until its first token
    });
    this.#decodeSlots[i] = { engine: d, lease, arrived };
    this.#result.predictedTtftS[i] = predictedS;
    this.#result.localPrefills++;
    side.prefill.enqueue(newPrefillJob(i, prompt, hashIds, false));
    this.#startDecode(d);
    return true;
  }

  /** A local prefill is done: first token; the request joins its own instance's batch. */
  #finishLocalPrefill(d: number, job: PrefillJob): void {
    const result = this.#result;
    const i = job.requestIndex;
    result.ttftS[i] = this.#nowS - this.#arrivalS[i];
    this.#firstTokenS[i] = this.#nowS;
    result.reusedTokens[i] = job.cachedTokens;
    const slot = this.#decodeSlots[i]!;
    slot.lease.firstToken();
    const { inputLength: prompt, outputLength: output } = this.#trace[i];
    // The instance's own scheduler double-checks the TBT SLO, as after a remote prefill.
    if (this.#refusedAfterPrefill(i, prompt, job.newTokens)) return;
    slot.arrived();
    if (output <= 1) {
      slot.lease.release();
      this.#decodeSlots[i] = undefined;
      return;
    }
    result.decodeInstance[i] = d;
    this.#decoders[d].add(decodeJob(i, output, prompt, this.#nowS));
  }

  /** A decode lease on the instance (a request decoding there from now on) and its expected arrival. */
  #takeDecodeSlot(decodeId: string, predictedTtftS: number): DecodeSlot {
    const lease = this.#account.lease(decodeId, 0);
    lease.firstToken();
    const arrived = this.#outlook.expect(decodeId, (this.#nowS + predictedTtftS) * 1000);
    return { engine: this.#decodeIndexOf.get(decodeId)!, lease, arrived };
  }

  #reject(reason: string): void {
    const counts = this.#result.rejectedByReason;
    counts[reason] = (counts[reason] ?? 0) + 1;
    this.#rejectedInPeriod++;
  }

  /** First token: record it, teach the instance's model, then the decode leg. */
  #finishPrefill(engine: number, job: PrefillJob): void {
    const result = this.#result;
    const i = job.requestIndex;
    result.ttftS[i] = this.#nowS - this.#arrivalS[i];
    this.#firstTokenS[i] = this.#nowS;
    result.reusedTokens[i] = job.cachedTokens;
    result.transferTokens[i] = job.transferTokens;
    this.#estimators[engine].observe({
      newTokens: job.newTokens,
      cachedTokens: job.cachedTokens,
      seconds: job.computeS,
    });
    const lease = this.#prefillLeases[i]!;
    this.#prefillLeases[i] = undefined;
    lease.firstToken();
    const output = this.#trace[i].outputLength;
    const prompt = this.#trace[i].inputLength;
    if (!this.#pd) {
      // Neutral: the request decodes where it was prefilled; the lease ends with it.
      if (output <= 1) return lease.release();
      this.#decodeSlots[i] = { engine, lease, arrived: () => {} };
      this.#neutral[engine].decode.add(decodeJob(i, output, prompt, this.#nowS));
      return;
    }
    lease.release(); // the prefill instance is done with it
    if (this.#refusedAfterPrefill(i, prompt, job.newTokens)) return;
    // The last prompt token is computed wherever the prefill runs: never redundant.
    result.redundantPrefillTokens += redundantPrefillTokens(
      Math.min(this.#heldByDecode[i], prompt - 1),
      job.cachedTokens,
      job.newTokens,
    );
    this.#handOffToDecode(i, output, prompt);
  }

  /**
   * P/D: the prefilled request reaches the decode instance chosen at arrival; it joins that
   * batch once its KV has been transferred (a request with no more tokens to decode ends here).
   */
  #handOffToDecode(i: number, output: number, prompt: number): void {
    const slot = this.#decodeSlots[i]!;
    slot.arrived();
    if (output <= 1) {
      slot.lease.release();
      this.#decodeSlots[i] = undefined;
      return;
    }
    const d = slot.engine;
    this.#result.decodeInstance[i] = d;
    this.#incoming[d]++;
    this.#incomingKv[d] += prompt;
    const transferS = prompt * this.#config.ttft.kvBytesPerToken / this.#config.pdTransferBytesPerS;
    this.#events.push(this.#nowS + transferS, {
      kind: "join",
      engine: d,
      job: decodeJob(i, output, prompt, this.#nowS),
      hashIds: this.#trace[i].hashIds,
    });
  }

  /**
   * Why decode engine `d` cannot take a request of `prompt` tokens now: the TBT SLO with its
   * batch now (`admitPd` on the engine's running and in-transfer requests, their KV too when the
   * run's router sees it) or its KV memory; undefined when it can.
   */
  #decodeRefusal(d: number, prompt: number): string | undefined {
    const config = this.#config;
    const engine = this.#decoders[d];
    const kvTokens = engine.kvTokens + this.#incomingKv[d];
    const forecast = withReportedKv({
      runningNow: engine.runningRequests + this.#incoming[d],
      joiningInS: [],
      meanDecodeS: this.#outlook.meanDecodeS,
    }, this.#reportedKvPerRequest(d));
    const { promptTokens, maxDecodeBatch } = this.#kvJudgment(prompt);
    const { verdict } = admitPd({ decode: { instanceId: engine.name, forecast }, promptTokens }, {
      enabled: true,
      mode: "early",
      tbtSloS: config.sloTbtS,
      decodeModel: config.routerDecodeModel,
      maxDecodeBatch,
    });
    if (!verdict.admit) return verdict.reason;
    if (kvTokens + prompt > config.decodeKvCapacityTokens) return "decode_kv_full";
    return undefined;
  }

  /**
   * What the run's router passes a decode judgment beside the batch: the request's prompt and the
   * engines' batch cap, except with the guess (as before).
   */
  #kvJudgment(prompt: number): { promptTokens?: number; maxDecodeBatch?: number } {
    if ((this.#run.decodeKv ?? "guess") === "guess") return {};
    return { promptTokens: prompt, maxDecodeBatch: this.#config.decodeMaxBatch };
  }

  /**
   * What decode engine `d` reports with `decodeKv: reported`, read at the decision (a router's
   * report is up to a poll old): its KV over its requests, none while it is idle.
   */
  #reportedKvPerRequest(d: number): number | undefined {
    const engine = this.#decoders[d];
    if (this.#run.decodeKv !== "reported" || engine.runningRequests <= 0) return undefined;
    return engine.kvTokens / engine.runningRequests;
  }

  /**
   * The baseline's decode-side check once the prefill is done: a refusal then wastes the
   * prefill's new tokens. True when request `i` was refused.
   */
  #refusedAfterPrefill(i: number, prompt: number, newTokens: number): boolean {
    if (this.#run.admission !== "baseline") return false;
    const refusal = this.#judgeAtDecode(i, prompt);
    if (refusal === undefined) return false;
    const result = this.#result;
    result.ttftS[i] = NaN;
    result.rejectedAfterPrefill++;
    result.wastedPrefillTokens += newTokens;
    this.#reject(refusal);
    return true;
  }

  /**
   * The baseline's decode-time judgment: the decode instance chosen at arrival (the pair is
   * chosen then, as the router does) refuses when this request would break the TBT SLO with its
   * batch now (`admitPd` on the engine's running and in-transfer requests) or not fit in its KV
   * memory. Returns the refusal's reason (and then frees the slot), or undefined.
   */
  #judgeAtDecode(i: number, prompt: number): string | undefined {
    const slot = this.#decodeSlots[i]!;
    const refusal = this.#decodeRefusal(slot.engine, prompt);
    if (refusal === undefined) return undefined;
    slot.arrived();
    slot.lease.release();
    this.#decodeSlots[i] = undefined;
    return `${refusal}_after_prefill`;
  }

  #decoded(job: DecodeJob): void {
    const i = job.requestIndex;
    const first = this.#firstTokenS[i];
    this.#result.tpotS[i] = (this.#nowS - first) / job.outputTokens;
    const slot = this.#decodeSlots[i];
    this.#decodeSlots[i] = undefined;
    slot?.lease.release();
    if (this.#pd) this.#outlook.observeDecode(this.#nowS - first);
  }

  /** Samples the loads at each period boundary up to `untilS`. */
  #sample(untilS: number): void {
    const config = this.#config;
    while (this.#nextSampleS <= untilS && this.#nextSampleS <= this.#lastArrival) {
      const saved = this.#nowS;
      this.#nowS = this.#nextSampleS;
      let queueS = 0;
      this.#names.forEach((name, k) => {
        const load = this.#account.load(name);
        this.#result.timeline.waitingTokens[k].push(load.prefillTokens);
        queueS += estimateQueueS(
          {
            id: name,
            healthy: true,
            localPrefixTokens: 0,
            waitingPrefillTokens: load.prefillTokens,
            waitingPrefillRequests: load.prefillRequests,
            runningRequests: 0,
          },
          config.ttft.prefillModel,
          config.ttft,
        );
      });
      const decoders = this.#pd ? this.#decoders : this.#neutral.map((e) => e.decode);
      // Batch occupancy: the step's part above the fixed cost over the SLO's (1 = at the SLO).
      const base = config.engineDecodeModel.baseS;
      const span = Math.max(1e-9, config.sloTbtS - base);
      let occupancy = 0;
      decoders.forEach((engine, d) => {
        const extra = this.#pd ? this.#incoming[d] : 0;
        const n = engine.runningRequests + extra;
        const kv = engine.kvTokens + (this.#pd ? this.#incomingKv[d] : 0);
        if (n > 0) occupancy += (decodeStepS(config.engineDecodeModel, n, kv) - base) / span;
        if (engine.runningRequests > 0) {
          this.#result.batchKv.sum += engine.kvTokens / engine.runningRequests;
          this.#result.batchKv.count++;
        }
      });
      const load = this.#result.load;
      load.prefill.push(queueS / this.#names.length / config.sloTtftS);
      load.decode.push(decoders.length ? occupancy / decoders.length : 0);
      load.rejected.push(this.#rejectedInPeriod);
      this.#rejectedInPeriod = 0;
      this.#nowS = saved;
      this.#nextSampleS += this.#periodS;
    }
  }
}

function decodeJob(i: number, output: number, prompt: number, firstTokenS: number): DecodeJob {
  return {
    requestIndex: i,
    remainingTokens: output - 1,
    outputTokens: output - 1,
    joinS: firstTokenS,
    contextTokens: prompt,
    lastTokenS: firstTokenS,
  };
}

interface PdEngines {
  names: string[];
  prefill: SimPrefillEngine[];
  neutral: SimNeutralEngine[];
  decodeNames: string[];
  decoders: SimDecodeEngine[];
  decodeSides: SimNeutralEngine[];
}

/** The simulated engines of a topology: N prefill + M decode, or N neutral ones. */
function buildEngines(
  topology: PdTopology,
  config: PdConfig,
  onGap: (gapS: number) => void,
  poolPrefix: (blocks: readonly number[]) => number,
  localChunkTokens?: number,
): PdEngines {
  const named = (prefix: string, count: number) =>
    Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(2, "0")}`);
  if (topology.kind === "pd") {
    const names = named("prefill", topology.prefill);
    const decodeNames = named("decode", topology.decode);
    const decodeSides = decodeSideEngines(decodeNames, config, onGap, localChunkTokens);
    return {
      names,
      prefill: prefillEngines(names, config, poolPrefix),
      neutral: [],
      decodeNames,
      decoders: decodeSides.map((side) => side.decode),
      decodeSides,
    };
  }
  const names = named("neutral", topology.instances);
  const prefill = prefillEngines(
    names,
    { ...config, chunkTokens: topology.chunkTokens ?? config.chunkTokens },
    poolPrefix,
    { unchunked: !topology.chunked },
  );
  const neutral = prefill.map((engine) =>
    new SimNeutralEngine(
      engine,
      // No batch cap: an aggregated engine batches every running request.
      new SimDecodeEngine(engine.name, config.engineDecodeModel, { onGap }),
      topology.chunked,
    )
  );
  return { names, prefill, neutral, decodeNames: [], decoders: [], decodeSides: [] };
}

/** A run's result before the replay fills it in. */
function emptyResult(
  run: PdRun,
  engines: PdEngines,
  n: number,
  tbt: GapHistogram,
  periodS: number,
): PdResult {
  return {
    label: run.label,
    policy: run.policy,
    admission: run.admission,
    decodeLoad: run.decodeLoad,
    localPrefill: run.localPrefill,
    decodeKv: run.decodeKv,
    topology: run.topology,
    instanceNames: engines.names,
    decodeNames: engines.decodeNames,
    ttftS: new Float64Array(n).fill(NaN),
    predictedTtftS: new Float64Array(n).fill(NaN),
    tpotS: new Float64Array(n).fill(NaN),
    promptTokens: new Float64Array(n),
    reusedTokens: new Float64Array(n),
    transferTokens: new Float64Array(n),
    instance: new Int32Array(n).fill(-1),
    decodeInstance: new Int32Array(n).fill(-1),
    rejectedByReason: {},
    rejectedAfterPrefill: 0,
    wastedPrefillTokens: 0,
    redundantPrefillTokens: 0,
    localPrefills: 0,
    lastArrivalS: 0,
    tbt,
    timeline: { periodS, waitingTokens: engines.names.map(() => []) },
    load: { periodS, prefill: [], decode: [], rejected: [] },
    busyS: [],
    evictions: 0,
    batchKv: { sum: 0, count: 0 },
    endS: 0,
  };
}
