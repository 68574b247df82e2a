import { LoadAccount, type LoadLease } from "../cluster/load_account.ts";
import type { KvPlacement } from "../kv/prefix.ts";
import type { PrefixHits } from "../kv/types.ts";
import { type AdmissionVerdict, admit, admitByLoad } from "../scheduling/admission.ts";
import { type DecodeModel, predictTbtS } from "../scheduling/decode_model.ts";
import { PrefillModelEstimator } from "../scheduling/prefill_model.ts";
import { createPolicy, paramsFor } from "../scheduling/registry.ts";
import type { TtftModelParams } from "../scheduling/ttft_estimate.ts";
import { choosePrefill, type PoolUse } from "../scheduling/prefill_choice.ts";
import type {
  Candidate,
  Decision,
  Policy,
  PrefillModelCoefficients,
  ScheduleRequest,
} from "../scheduling/types.ts";
import { BlockCache } from "./block_cache.ts";
import { type DecodeJob, SimDecodeEngine } from "./decode_engine.ts";
import { EventQueue } from "./event_queue.ts";
import { lookupPrefix, poolPrefixLength } from "./lookup.ts";
import { newPrefillJob, type PrefillJob, SimPrefillEngine } from "./prefill_engine.ts";
import { seededRandom } from "./rng.ts";
import { simScheduleRequest } from "./schedule_request.ts";
import { assignBands, type BandAssignment, type BandSpec, DEFAULT_BANDS } from "./sim_bands.ts";
import { admitsAfterWait, DEFAULT_SIM_QUEUE, SimQueue, type SimQueueConfig } from "./sim_queue.ts";
import { idleTtftS, worthQueueing } from "../scheduling/queue_rules.ts";
import { hasRoom } from "../scheduling/late_binding.ts";
import type { TraceRequest } from "./trace.ts";

/**
 * How engines reuse the shared pool (blocks held by any instance):
 * - `planned`: only when the dispatch decision planned a transfer (Mooncake's Conductor tells the
 *   prefill node what to load); other policies run on local caches, as in the paper's baselines.
 * - `always`: every engine loads any pool prefix (an engine connector that reads the store itself).
 * - `off`: local caches only, and policies are told there is no pool.
 */
export type KvPoolMode = "planned" | "always" | "off";

/** How the chosen engine uses the pool (src/scheduling/prefill_choice.ts) in each `kvPool` mode. */
export function poolUseOf(mode: KvPoolMode): PoolUse {
  return mode === "off" ? "never" : mode;
}
/** `queue`: what `ttft` would refuse waits in the flow-control queue (src/sim/sim_queue.ts). */
export type AdmissionMode = "off" | "ttft" | "load" | "queue";

export interface SimConfig {
  instances: number;
  /** KV cache capacity per prefill instance, in blocks. */
  cacheBlocks: number;
  chunkTokens: number;
  blockTokens: number;
  /** Arrival-rate multiplier: a request at trace time t arrives at t / speed. */
  speed: number;
  seed: number;
  sloTtftS: number;
  sloTbtS: number;
  kvPool: KvPoolMode;
  /** The router's model: prior prefill coefficients, KV size, transfer bandwidth, threshold. */
  ttft: TtftModelParams;
  /** The simulated engines' true prefill time (equal to the router's prior by default). */
  engineModel: PrefillModelCoefficients;
  /** Per-instance compute slowdowns drawn uniformly from [1 − h, 1 + h] (0: identical). */
  heterogeneity: number;
  /** Seconds each engine iteration costs however many prompts it batches (default 0). */
  engineStepS?: number;
  /** Refine each instance's prefill model online from the prefills it completes. */
  refine: boolean;
  /** 0: prefill only (TTFT); N: also N decode instances (TBT admission, TPOT). */
  decodeInstances: number;
  decodeModel: DecodeModel;
  /** Load-threshold admission baseline: refuse when every instance queues at least this many. */
  loadThresholdTokens: number;
  /** Llumnix load filter for cache_aware / kv_hit_len (off when unset). */
  loadFilterTokens?: number;
  /** Points of the per-instance load timeline. */
  timelinePoints: number;
  /** The `queue` admission's TTL and bounds (default: the router's). */
  queue?: SimQueueConfig;
  /** Priority bands and tenants of the requests (default: 20% band 0, 80% band 1, 4 tenants). */
  bands?: BandSpec;
}

export interface PolicyRun {
  /** Name in results (e.g. `mooncake_ttft` or `mooncake_ttft+ttft`). */
  label: string;
  policy: string;
  admission: AdmissionMode;
  /** Overrides `SimConfig.loadThresholdTokens` for this run. */
  loadThresholdTokens?: number;
  /** The policy's own parameters, as a config gives them (affinity_ttft's `duplicationWeight`). */
  params?: Record<string, unknown>;
  /**
   * An A/B experiment on one cluster: request i is planned by `arms.policies[arms.of[i]]`
   * (instead of `policy`), as a live split routes each request by its arm's policy.
   */
  arms?: { policies: { name: string; params?: Record<string, unknown> }[]; of: Int32Array };
  /**
   * Late binding (src/scheduling/late_binding.ts): while every instance has more prefill tokens
   * waiting than this, an arriving request is held, first come first served, and planned once one
   * has room. Unset: every request is planned and sent as it arrives.
   */
  holdAboveTokens?: number;
}

export interface SimResult {
  label: string;
  policy: string;
  admission: AdmissionMode;
  instanceNames: string[];
  /** Per request, in trace order; NaN where rejected or not applicable. */
  ttftS: Float64Array;
  predictedTtftS: Float64Array;
  tpotS: Float64Array;
  promptTokens: Float64Array;
  reusedTokens: Float64Array;
  transferTokens: Float64Array;
  /** Index into `instanceNames`, −1 when rejected. */
  instance: Int32Array;
  /** Per request: its priority band and tenant (src/sim/sim_bands.ts). */
  band: Int32Array;
  tenant: Int32Array;
  /** Per request: seconds waited in the flow-control queue; NaN when it never waited. */
  queueWaitS: Float64Array;
  /** Requests late binding held at arrival (0 without `holdAboveTokens`). */
  heldRequests: number;
  /** Per request: how long late binding held it; NaN where it was not held. */
  heldS: Float64Array;
  /** Last arrival − first arrival (the span goodput is measured over). */
  arrivalSpanS: number;
  rejectedByReason: Record<string, number>;
  /** Sampled every `timeline.periodS`: waiting prefill tokens per instance (router's account). */
  timeline: { periodS: number; waitingTokens: number[][] };
  busyS: number[];
  evictions: number;
  /** One decision with its explanation, for the docs. */
  exampleDecision?: Decision;
  endS: number;
}

type SimEvent =
  | { kind: "prefill"; engine: number }
  | { kind: "decode"; engine: number }
  | { kind: "recheck" };

/** A request's plan: the decision, its candidates and the predicted TTFT from now. */
interface Plan {
  request: ScheduleRequest;
  choice: ReturnType<typeof choosePrefill>;
  candidates: Candidate[];
  chosenId: string;
  predicted: number;
}

/** Replays `trace` through one policy on a simulated cluster. Deterministic for a seed. */
export function simulate(
  trace: readonly TraceRequest[],
  config: SimConfig,
  run: PolicyRun,
): SimResult {
  return new ClusterReplay(trace, config, run).replay();
}

/** One replay: the simulated engines, the router's state and the results, on clock `#nowS`. */
class ClusterReplay {
  readonly #trace: readonly TraceRequest[];
  readonly #config: SimConfig;
  readonly #run: PolicyRun;
  readonly #policy: Policy;
  readonly #armPolicies: Policy[];
  readonly #random: () => number;
  /**
   * Re-plans of waiting requests draw from their own stream and count their own sequence, so a
   * queue run and a 429-only run see the same draws for every arrival: they differ only by what
   * the queue admits.
   */
  readonly #replanRandom: () => number;
  #replanSequence = 0;
  readonly #account: LoadAccount;
  readonly #names: string[];
  readonly #indexOf: Map<string, number>;
  readonly #engines: SimPrefillEngine[];
  readonly #placements: KvPlacement[];
  readonly #estimators: PrefillModelEstimator[];
  readonly #decoders: SimDecodeEngine[];
  readonly #result: SimResult;
  readonly #arrivalS: number[];
  readonly #leases: (LoadLease | undefined)[];
  readonly #events = new EventQueue<SimEvent>();
  readonly #lastArrival: number;
  readonly #periodS: number;
  readonly #bands: BandAssignment;
  /** Only with the `queue` admission. */
  readonly #queue?: SimQueue;
  /** Late binding's held requests, in arrival order. */
  readonly #held: number[] = [];
  #nowS = 0;
  /** The last arrival or engine event (a stale TTL recheck does not end the run). */
  #endS = 0;
  #nextSampleS = 0;
  #sequence = 0;

  constructor(trace: readonly TraceRequest[], config: SimConfig, run: PolicyRun) {
    const n = trace.length;
    this.#trace = trace;
    this.#config = config;
    this.#run = run;
    const shared = { ...config.ttft, loadFilterTokens: config.loadFilterTokens };
    this.#policy = createPolicy(run.policy, { ...paramsFor(run.policy, shared), ...run.params });
    this.#armPolicies = (run.arms?.policies ?? []).map((arm) =>
      createPolicy(arm.name, { ...paramsFor(arm.name, shared), ...arm.params })
    );
    this.#random = seededRandom(config.seed);
    this.#replanRandom = seededRandom(config.seed ^ 0x51ed);
    this.#account = new LoadAccount({
      now: () => this.#nowS * 1000,
      // The simulated engines always report a first token: nothing to expire.
      expireAfterMs: Number.POSITIVE_INFINITY,
    });
    const names = Array.from(
      { length: config.instances },
      (_, i) => `prefill-${String(i).padStart(2, "0")}`,
    );
    this.#names = names;
    this.#indexOf = new Map(names.map((name, i) => [name, i]));
    this.#engines = prefillEngines(names, config, (blocks) => this.#poolPrefix(blocks));
    this.#placements = names.map((name) => ({ id: name, kvHost: name }));
    this.#estimators = names.map(() => new PrefillModelEstimator(config.ttft.prefillModel));
    this.#decoders = Array.from(
      { length: config.decodeInstances },
      (_, i) => new SimDecodeEngine(`decode-${String(i).padStart(2, "0")}`, config.decodeModel),
    );
    this.#arrivalS = trace.map((r) => r.timestampMs / 1000 / config.speed);
    this.#leases = new Array(n);
    this.#lastArrival = n > 0 ? this.#arrivalS[n - 1] : 0;
    this.#periodS = Math.max(this.#lastArrival / Math.max(1, config.timelinePoints), 1e-3);
    this.#result = emptyResult(n, run, names, this.#periodS);
    this.#bands = assignBands(n, config.bands ?? DEFAULT_BANDS, config.seed);
    this.#result.band = this.#bands.band;
    this.#result.tenant = this.#bands.tenant;
    this.#result.arrivalSpanS = n > 0 ? this.#lastArrival - this.#arrivalS[0] : 0;
    if (run.admission === "queue") {
      this.#queue = new SimQueue(n, config.queue ?? DEFAULT_SIM_QUEUE, config.sloTtftS);
    }
  }

  /** Runs arrivals and engine events in time order to the end; returns the results. */
  replay(): SimResult {
    const n = this.#trace.length;
    const events = this.#events;
    let next = 0;
    while (next < n || events.size > 0) {
      const eventS = events.peekTime();
      const arriveS = next < n ? this.#arrivalS[next] : Number.POSITIVE_INFINITY;
      this.#sample(Math.min(eventS, arriveS));
      // Completions first at equal times: their blocks are visible to a request arriving then.
      if (eventS <= arriveS) {
        const event = events.pop()!;
        this.#nowS = event.time;
        if (event.value.kind === "recheck") this.#pumpQueue();
        else {
          this.#endS = this.#nowS;
          if (event.value.kind === "prefill") this.#prefillDone(event.value.engine);
          else this.#decodeDone(event.value.engine);
        }
      } else {
        this.#nowS = this.#endS = arriveS;
        this.#arrive(next++);
      }
    }
    const result = this.#result;
    result.endS = this.#endS;
    if (this.#queue) this.#queueResults(this.#queue);
    result.busyS = this.#engines.map((e) => e.busyS);
    result.evictions = this.#engines.reduce((sum, e) => sum + e.cache.evictions, 0);
    return result;
  }

  /** Blocks from the first one held by some instance (what a pool-reading engine can load). */
  #poolPrefix(blocks: readonly number[]): number {
    return poolPrefixLength(this.#engines, blocks);
  }

  #startPrefill(engine: number): void {
    const duration = this.#engines[engine].startIteration(this.#nowS);
    if (duration !== undefined) {
      this.#events.push(this.#nowS + duration, { kind: "prefill", engine });
    }
  }

  #startDecode(engine: number): void {
    const duration = this.#decoders[engine].startStep();
    if (duration !== undefined) {
      this.#events.push(this.#nowS + duration, { kind: "decode", engine });
    }
  }

  /** Request `i` arrives: plan and admit it, then send it, queue it or refuse it. */
  #arrive(i: number): void {
    const plan = this.#plan(i);
    const bound = this.#run.holdAboveTokens;
    if (bound !== undefined && (this.#held.length > 0 || !hasRoom(plan.candidates, bound))) {
      this.#result.heldRequests++;
      this.#held.push(i);
      return;
    }
    this.#admitAndSend(i, plan);
  }

  #admitAndSend(i: number, plan: Plan): void {
    const verdict = this.#admit(plan.predicted, plan.chosenId, plan.candidates);
    if (this.#queue) return this.#arriveQueued(this.#queue, i, plan, verdict);
    if (!verdict.admit) return this.#reject(verdict.reason);
    this.#start(i, plan);
  }

  /**
   * With the queue (the router's rules, src/scheduling/queue_rules.ts): admitted, it goes; refused,
   * it waits if an idle instance could still serve it within the SLO.
   */
  #arriveQueued(queue: SimQueue, i: number, plan: Plan, verdict: AdmissionVerdict): void {
    const priority = this.#bands.band[i];
    if (verdict.admit) return this.#start(i, plan);
    const idle = idleTtftS(plan.request, plan.candidates, this.#config.ttft);
    if (!worthQueueing(idle, this.#config.sloTtftS)) return this.#reject(verdict.reason);
    const deadline = queue.push({
      index: i,
      priority,
      tenant: `tenant-${this.#bands.tenant[i]}`,
      promptTokens: this.#trace[i].inputLength,
      refusedFor: verdict.reason,
    }, this.#nowS);
    if (deadline === undefined) return this.#reject("queue_full");
    this.#events.push(deadline, { kind: "recheck" });
    // The router re-plans within recheckMs of a join; nothing else moves meanwhile here.
    this.#pumpQueue();
  }

  /**
   * Late binding: held requests, first come first served, each planned against the cluster as it
   * is now and sent while an instance has room (their prefill ends free it: a request always
   * holds behind queued work, so this is reached).
   */
  #releaseHeld(): void {
    const bound = this.#run.holdAboveTokens;
    while (bound !== undefined && this.#held.length > 0) {
      const plan = this.#plan(this.#held[0], "replan");
      if (!hasRoom(plan.candidates, bound)) return;
      const i = this.#held.shift()!;
      this.#result.heldS[i] = this.#nowS - this.#arrivalS[i];
      this.#admitAndSend(i, plan);
    }
  }

  /** Re-plans waiting requests (from scratch: lookup, policy, admission) counting their wait. */
  #pumpQueue(): void {
    this.#queue?.pump(this.#nowS, (i, waitedS, refusedFor) => {
      const plan = this.#plan(i, "replan");
      if (!this.#admit(plan.predicted, plan.chosenId, plan.candidates).admit) return false;
      const { admitWhen } = this.#config.queue ?? DEFAULT_SIM_QUEUE;
      const chosen = { ...plan, predictedTtftS: plan.predicted };
      const sloS = this.#config.sloTtftS;
      if (!admitsAfterWait(admitWhen, chosen, waitedS, sloS, refusedFor)) return false;
      this.#start(i, plan);
      return true;
    });
  }

  #reject(reason: string): void {
    const rejected = this.#result.rejectedByReason;
    rejected[reason] = (rejected[reason] ?? 0) + 1;
  }

  /** The queue's waits, and its expiries as 429s. */
  #queueResults(queue: SimQueue): void {
    this.#result.queueWaitS = queue.waitS;
    for (const _ of queue.expired) this.#reject("queue_timeout");
    for (const _ of queue.displaced) this.#reject("queue_full");
  }

  /** Lookup and policy for request `i` now; arrivals and re-plans draw from their own streams. */
  #plan(i: number, kind: "arrival" | "replan" = "arrival"): Plan {
    const config = this.#config;
    const result = this.#result;
    const request = this.#trace[i];
    const prompt = request.inputLength;
    result.promptTokens[i] = prompt;
    const hits = this.#lookup(request.hashIds);
    const tokens = (chunks: number) => Math.min(chunks * config.blockTokens, prompt);
    const candidates = this.#candidates(hits, tokens);
    const scheduleRequest = simScheduleRequest(request, hits, candidates, {
      blockTokens: config.blockTokens,
      poolOff: config.kvPool === "off",
    });
    const planner = this.#run.arms ? this.#armPolicies[this.#run.arms.of[i]] : this.#policy;
    const choice = choosePrefill(scheduleRequest, candidates, planner, {
      random: kind === "arrival" ? this.#random : this.#replanRandom,
      sequence: kind === "arrival" ? this.#sequence++ : this.#replanSequence++,
    }, { ttft: config.ttft, poolUse: poolUseOf(config.kvPool) });
    const decision = choice.decision;
    // A representative explanation: past the warm-up, a prefix to reuse, instances busy.
    if (
      result.exampleDecision === undefined && i >= this.#trace.length / 2 &&
      scheduleRequest.poolPrefixTokens > 0 && candidates.some((c) => c.waitingPrefillTokens > 0)
    ) result.exampleDecision = decision;
    return {
      request: scheduleRequest,
      choice,
      candidates,
      chosenId: decision.ranking[0],
      predicted: choice.predictedTtftS!,
    };
  }

  /** Sends request `i` to its planned instance: a lease, then the engine's queue. */
  #start(i: number, plan: Plan): void {
    const result = this.#result;
    const request = this.#trace[i];
    const k = this.#indexOf.get(plan.chosenId)!;
    // The client's prediction: any time it already waited, then the planned TTFT.
    result.predictedTtftS[i] = (this.#nowS - this.#arrivalS[i]) + plan.predicted;
    // account: the uncomputed tokens the router expects, released at the first token.
    this.#leases[i] = this.#account.lease(
      plan.chosenId,
      request.inputLength - plan.choice.reusedTokens,
    );
    result.instance[i] = k;
    this.#engines[k].enqueue(
      newPrefillJob(i, request.inputLength, request.hashIds, plan.choice.usePool),
    );
    this.#startPrefill(k);
  }

  /** The router's prefix lookup over the instances' caches (src/sim/lookup.ts). */
  #lookup(hashIds: readonly number[]): PrefixHits {
    return lookupPrefix(this.#engines, this.#placements, hashIds);
  }

  /** Candidates from the router's own load account, the lookup and the learned models. */
  #candidates(hits: PrefixHits, tokens: (chunks: number) => number): Candidate[] {
    return this.#names.map((name, k) => {
      const load = this.#account.load(name);
      const candidate: Candidate = {
        id: name,
        healthy: true,
        localPrefixTokens: tokens(hits.localChunks.get(name) ?? 0),
        waitingPrefillTokens: load.prefillTokens,
        waitingPrefillRequests: load.prefillRequests,
        runningRequests: load.decodeRequests,
      };
      if (this.#config.refine) candidate.prefillModel = this.#estimators[k].model();
      return candidate;
    });
  }

  /** The run's admission mode applied to the planned dispatch. */
  #admit(predicted: number, chosenId: string, candidates: Candidate[]): AdmissionVerdict {
    const config = this.#config;
    if (this.#run.admission === "ttft" || this.#run.admission === "queue") {
      return admit({
        predictedTtftS: predicted,
        predictedTbtS: this.#decoders.length > 0
          ? predictTbtS(config.decodeModel, this.#decoders.map((d) => d.runningRequests))
          : undefined,
        instanceId: chosenId,
      }, { enabled: true, ttftSloS: config.sloTtftS, tbtSloS: config.sloTbtS });
    }
    if (this.#run.admission === "load") {
      const minWaiting = Math.min(...candidates.map((c) => c.waitingPrefillTokens));
      return admitByLoad(minWaiting, {
        enabled: true,
        maxWaitingPrefillTokens: this.#run.loadThresholdTokens ?? config.loadThresholdTokens,
      });
    }
    return { admit: true };
  }

  #prefillDone(engine: number): void {
    for (const job of this.#engines[engine].finishIteration()) this.#finishPrefill(engine, job);
    this.#startPrefill(engine);
    this.#releaseHeld();
    // Prefill capacity freed at the first token, when the router's load lease ends.
    this.#pumpQueue();
  }

  #decodeDone(engine: number): void {
    const finished = this.#decoders[engine].finishStep();
    for (const job of finished) {
      this.#result.tpotS[job.requestIndex] = (this.#nowS - job.joinS) / job.outputTokens;
    }
    this.#startDecode(engine);
    // The router wakes its queue whenever a request ends: decode room may fit a TBT refusal.
    if (finished.length > 0) this.#pumpQueue();
  }

  /** First token: record it, teach the instance's model, then hand the request to a decoder. */
  #finishPrefill(engine: number, job: PrefillJob): void {
    const result = this.#result;
    const i = job.requestIndex;
    result.ttftS[i] = this.#nowS - this.#arrivalS[i];
    result.reusedTokens[i] = job.cachedTokens;
    result.transferTokens[i] = job.transferTokens;
    this.#estimators[engine].observe({
      newTokens: job.newTokens,
      cachedTokens: job.cachedTokens,
      seconds: job.computeS,
    });
    const lease = this.#leases[i]!;
    lease.firstToken();
    lease.release(); // the prefill instance is done with it; decode is tracked by the decoders
    this.#leases[i] = undefined;
    const output = this.#trace[i].outputLength;
    const decoders = this.#decoders;
    if (decoders.length === 0 || output <= 1) return;
    let best = 0;
    for (let d = 1; d < decoders.length; d++) {
      if (decoders[d].runningRequests < decoders[best].runningRequests) best = d;
    }
    const decodeJob: DecodeJob = {
      requestIndex: i,
      remainingTokens: output - 1,
      outputTokens: output - 1,
      joinS: this.#nowS,
    };
    decoders[best].add(decodeJob);
    this.#startDecode(best);
  }

  /** Samples every instance's waiting tokens at each period boundary up to `untilS`. */
  #sample(untilS: number): void {
    while (this.#nextSampleS <= untilS && this.#nextSampleS <= this.#lastArrival) {
      const saved = this.#nowS;
      this.#nowS = this.#nextSampleS;
      this.#names.forEach((name, k) =>
        this.#result.timeline.waitingTokens[k].push(this.#account.load(name).prefillTokens)
      );
      this.#nowS = saved;
      this.#nextSampleS += this.#periodS;
    }
  }
}

/** The prefill instances, with compute slowdowns drawn from the engine seed. */
export function prefillEngines(
  names: readonly string[],
  config: Pick<
    SimConfig,
    | "seed"
    | "cacheBlocks"
    | "engineModel"
    | "heterogeneity"
    | "engineStepS"
    | "chunkTokens"
    | "blockTokens"
    | "ttft"
  >,
  poolPrefix: (blocks: readonly number[]) => number,
  options: { unchunked?: boolean } = {},
): SimPrefillEngine[] {
  const engineRandom = seededRandom(config.seed ^ 0x5eed);
  return names.map((name) =>
    new SimPrefillEngine(name, new BlockCache(config.cacheBlocks), {
      model: config.engineModel,
      slowdown: 1 + config.heterogeneity * (2 * engineRandom() - 1),
      chunkTokens: config.chunkTokens,
      blockTokens: config.blockTokens,
      kvBytesPerToken: config.ttft.kvBytesPerToken,
      transferBytesPerS: config.ttft.transferBytesPerS,
      ...(options.unchunked ? { unchunked: true } : {}),
      ...(config.engineStepS ? { stepS: config.engineStepS } : {}),
    }, poolPrefix)
  );
}

function emptyResult(
  n: number,
  run: PolicyRun,
  names: string[],
  periodS: number,
): SimResult {
  return {
    label: run.label,
    policy: run.policy,
    admission: run.admission,
    instanceNames: names,
    ttftS: new Float64Array(n).fill(NaN),
    predictedTtftS: new Float64Array(n).fill(NaN),
    tpotS: new Float64Array(n).fill(NaN),
    promptTokens: new Float64Array(n),
    reusedTokens: new Float64Array(n),
    transferTokens: new Float64Array(n),
    instance: new Int32Array(n).fill(-1),
    band: new Int32Array(n),
    tenant: new Int32Array(n),
    queueWaitS: new Float64Array(n).fill(NaN),
    heldRequests: 0,
    heldS: new Float64Array(n).fill(NaN),
    arrivalSpanS: 0,
    rejectedByReason: {},
    timeline: { periodS, waitingTokens: names.map(() => []) },
    busyS: [],
    evictions: 0,
    endS: 0,
  };
}
