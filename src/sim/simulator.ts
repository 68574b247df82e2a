import { LoadAccount, type LoadLease } from "../cluster/load_account.ts";
import { computePrefixHits } from "../kv/prefix.ts";
import type { KeyLocation } from "../kv/types.ts";
import { type AdmissionVerdict, admit, admitByLoad } from "../scheduling/admission.ts";
import { type DecodeModel, predictTbtS } from "../scheduling/decode_model.ts";
import { PrefillModelEstimator } from "../scheduling/prefill_model.ts";
import { createPolicy } from "../scheduling/registry.ts";
import { estimateTtft, type TtftModelParams } from "../scheduling/ttft_estimate.ts";
import type { Candidate, Decision, PrefillModelCoefficients } from "../scheduling/types.ts";
import { BlockCache } from "./block_cache.ts";
import { type DecodeJob, SimDecodeEngine } from "./decode_engine.ts";
import { EventQueue } from "./event_queue.ts";
import { newPrefillJob, type PrefillJob, SimPrefillEngine } from "./prefill_engine.ts";
import { seededRandom } from "./rng.ts";
import type { TraceRequest } from "./trace.ts";

/**
 * How engines reuse the shared pool (blocks held by any instance):
 * - `planned`: only when the dispatch decision planned a transfer (Mooncake's Conductor tells the
 *   prefill node what to load); other policies run on local caches, as in the paper's baselines.
 * - `always`: every engine loads any pool prefix (an engine connector that reads the store itself).
 * - `off`: local caches only, and policies are told there is no pool.
 */
export type KvPoolMode = "planned" | "always" | "off";
export type AdmissionMode = "off" | "ttft" | "load";

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
}

export interface PolicyRun {
  /** Name in results (e.g. `mooncake_ttft` or `mooncake_ttft+ttft`). */
  label: string;
  policy: string;
  admission: AdmissionMode;
  /** Overrides `SimConfig.loadThresholdTokens` for this run. */
  loadThresholdTokens?: number;
  /**
   * An A/B experiment on one cluster: request i is planned by `arms.policies[arms.of[i]]`
   * (instead of `policy`), as a live split routes each request by its arm's policy.
   */
  arms?: { policies: { name: string; params?: Record<string, unknown> }[]; of: Int32Array };
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
  rejectedByReason: Record<string, number>;
  /** Sampled every `timeline.periodS`: waiting prefill tokens per instance (router's account). */
  timeline: { periodS: number; waitingTokens: number[][] };
  busyS: number[];
  evictions: number;
  /** One decision with its explanation, for the docs. */
  exampleDecision?: Decision;
  endS: number;
}

type SimEvent = { kind: "prefill"; engine: number } | { kind: "decode"; engine: number };

/** Replays `trace` through one policy on a simulated cluster. Deterministic for a seed. */
export function simulate(
  trace: readonly TraceRequest[],
  config: SimConfig,
  run: PolicyRun,
): SimResult {
  const n = trace.length;
  const policy = createPolicy(run.policy, {
    ...config.ttft,
    loadFilterTokens: config.loadFilterTokens,
  });
  const armPolicies = (run.arms?.policies ?? []).map((arm) =>
    createPolicy(arm.name, {
      ...config.ttft,
      loadFilterTokens: config.loadFilterTokens,
      ...arm.params,
    })
  );
  const random = seededRandom(config.seed);
  const engineRandom = seededRandom(config.seed ^ 0x5eed);
  let nowS = 0;
  const account = new LoadAccount({
    now: () => nowS * 1000,
    // The simulated engines always report a first token: nothing to expire.
    expireAfterMs: Number.POSITIVE_INFINITY,
  });

  const names = Array.from(
    { length: config.instances },
    (_, i) => `prefill-${String(i).padStart(2, "0")}`,
  );
  const indexOf = new Map(names.map((name, i) => [name, i]));
  const poolPrefix = (blocks: readonly number[]) => {
    let length = 0;
    while (length < blocks.length && engines.some((e) => e.cache.has(blocks[length]))) length++;
    return length;
  };
  const engines = names.map((name) =>
    new SimPrefillEngine(name, new BlockCache(config.cacheBlocks), {
      model: config.engineModel,
      slowdown: 1 + config.heterogeneity * (2 * engineRandom() - 1),
      chunkTokens: config.chunkTokens,
      blockTokens: config.blockTokens,
      kvBytesPerToken: config.ttft.kvBytesPerToken,
      transferBytesPerS: config.ttft.transferBytesPerS,
    }, poolPrefix)
  );
  const placements = names.map((name) => ({ id: name, kvHost: name }));
  const estimators = names.map(() => new PrefillModelEstimator(config.ttft.prefillModel));
  const decoders = Array.from(
    { length: config.decodeInstances },
    (_, i) => new SimDecodeEngine(`decode-${String(i).padStart(2, "0")}`, config.decodeModel),
  );

  const result: SimResult = {
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
    rejectedByReason: {},
    timeline: { periodS: 1, waitingTokens: names.map(() => []) },
    busyS: [],
    evictions: 0,
    endS: 0,
  };
  const arrivalS = trace.map((r) => r.timestampMs / 1000 / config.speed);
  const leases: (LoadLease | undefined)[] = new Array(n);
  const events = new EventQueue<SimEvent>();
  const lastArrival = n > 0 ? arrivalS[n - 1] : 0;
  const periodS = Math.max(lastArrival / Math.max(1, config.timelinePoints), 1e-3);
  result.timeline.periodS = periodS;
  let nextSampleS = 0;
  let sequence = 0;

  const startPrefill = (engine: number) => {
    const duration = engines[engine].startIteration(nowS);
    if (duration !== undefined) events.push(nowS + duration, { kind: "prefill", engine });
  };
  const startDecode = (engine: number) => {
    const duration = decoders[engine].startStep();
    if (duration !== undefined) events.push(nowS + duration, { kind: "decode", engine });
  };

  const dispatch = (i: number) => {
    const request = trace[i];
    const prompt = request.inputLength;
    result.promptTokens[i] = prompt;
    // lookup: the trace's hash ids are the store keys; each instance's KV host is its own name.
    // Keys past the first absent block cannot extend any prefix: stop there.
    const chunkKeys: string[][] = [];
    const locations = new Map<string, KeyLocation>();
    for (const id of request.hashIds) {
      const key = String(id);
      chunkKeys.push([key]);
      const memoryHosts: string[] = [];
      for (const engine of engines) if (engine.cache.has(id)) memoryHosts.push(engine.name);
      locations.set(key, {
        present: memoryHosts.length > 0,
        memoryHosts,
        localDiskHosts: [],
        sharedDisk: false,
      });
      if (memoryHosts.length === 0) break;
    }
    const hits = computePrefixHits(chunkKeys, locations, placements);
    const tokens = (chunks: number) => Math.min(chunks * config.blockTokens, prompt);
    const scheduleRequest = {
      promptTokens: prompt,
      poolPrefixTokens: config.kvPool === "off" ? 0 : tokens(hits.poolChunks),
    };
    // candidates: the router's own load account, the lookup, the learned models.
    const candidates: Candidate[] = names.map((name, k) => {
      const load = account.load(name);
      const candidate: Candidate = {
        id: name,
        healthy: true,
        localPrefixTokens: tokens(hits.localChunks.get(name) ?? 0),
        waitingPrefillTokens: load.prefillTokens,
        waitingPrefillRequests: load.prefillRequests,
        runningRequests: load.decodeRequests,
      };
      if (config.refine) candidate.prefillModel = estimators[k].model();
      return candidate;
    });
    const planner = run.arms ? armPolicies[run.arms.of[i]] : policy;
    const decision = planner.select(scheduleRequest, candidates, { random, sequence: sequence++ });
    // A representative explanation: past the warm-up, a prefix to reuse, instances busy.
    if (
      result.exampleDecision === undefined && i >= n / 2 && scheduleRequest.poolPrefixTokens > 0 &&
      candidates.some((c) => c.waitingPrefillTokens > 0)
    ) result.exampleDecision = decision;
    const chosenId = decision.ranking[0];
    const k = indexOf.get(chosenId)!;
    const chosen = candidates[k];
    const plannedTransfer = decision.scores.find((s) => s.id === chosenId)?.transferTokens ?? 0;
    const usePool = config.kvPool === "always" ||
      (config.kvPool === "planned" && plannedTransfer > 0);
    const estimate = estimateTtft(scheduleRequest, chosen, config.ttft, { allowTransfer: usePool });
    const predicted = decision.predictedTtftS ?? estimate.totalS;
    result.predictedTtftS[i] = predicted;

    let verdict: AdmissionVerdict = { admit: true };
    if (run.admission === "ttft") {
      verdict = admit({
        predictedTtftS: predicted,
        predictedTbtS: decoders.length > 0
          ? predictTbtS(config.decodeModel, decoders.map((d) => d.runningRequests))
          : undefined,
        instanceId: chosenId,
      }, { enabled: true, ttftSloS: config.sloTtftS, tbtSloS: config.sloTbtS });
    } else if (run.admission === "load") {
      const minWaiting = Math.min(...candidates.map((c) => c.waitingPrefillTokens));
      verdict = admitByLoad(minWaiting, {
        enabled: true,
        maxWaitingPrefillTokens: run.loadThresholdTokens ?? config.loadThresholdTokens,
      });
    }
    if (!verdict.admit) {
      result.rejectedByReason[verdict.reason] = (result.rejectedByReason[verdict.reason] ?? 0) + 1;
      return;
    }
    // account: the uncomputed tokens the router expects, released at the first token.
    leases[i] = account.lease(chosenId, prompt - estimate.reusedTokens);
    result.instance[i] = k;
    engines[k].enqueue(newPrefillJob(i, prompt, request.hashIds, usePool));
    startPrefill(k);
  };

  const prefillDone = (engine: number) => {
    for (const job of engines[engine].finishIteration()) finishPrefill(engine, job);
    startPrefill(engine);
  };

  const finishPrefill = (engine: number, job: PrefillJob) => {
    const i = job.requestIndex;
    result.ttftS[i] = nowS - arrivalS[i];
    result.reusedTokens[i] = job.cachedTokens;
    result.transferTokens[i] = job.transferTokens;
    estimators[engine].observe({
      newTokens: job.newTokens,
      cachedTokens: job.cachedTokens,
      seconds: job.computeS,
    });
    const lease = leases[i]!;
    lease.firstToken();
    lease.release(); // the prefill instance is done with it; decode is tracked by the decoders
    leases[i] = undefined;
    const output = trace[i].outputLength;
    if (decoders.length === 0 || output <= 1) return;
    let best = 0;
    for (let d = 1; d < decoders.length; d++) {
      if (decoders[d].runningRequests < decoders[best].runningRequests) best = d;
    }
    const decodeJob: DecodeJob = {
      requestIndex: i,
      remainingTokens: output - 1,
      outputTokens: output - 1,
      joinS: nowS,
    };
    decoders[best].add(decodeJob);
    startDecode(best);
  };

  const sample = (untilS: number) => {
    while (nextSampleS <= untilS && nextSampleS <= lastArrival) {
      const saved = nowS;
      nowS = nextSampleS;
      names.forEach((name, k) =>
        result.timeline.waitingTokens[k].push(account.load(name).prefillTokens)
      );
      nowS = saved;
      nextSampleS += periodS;
    }
  };

  let next = 0;
  while (next < n || events.size > 0) {
    const eventS = events.peekTime();
    const arriveS = next < n ? arrivalS[next] : Number.POSITIVE_INFINITY;
    sample(Math.min(eventS, arriveS));
    // Completions first at equal times: their blocks are visible to a request arriving then.
    if (eventS <= arriveS) {
      const event = events.pop()!;
      nowS = event.time;
      if (event.value.kind === "prefill") prefillDone(event.value.engine);
      else {
        for (const job of decoders[event.value.engine].finishStep()) {
          result.tpotS[job.requestIndex] = (nowS - job.joinS) / job.outputTokens;
        }
        startDecode(event.value.engine);
      }
    } else {
      nowS = arriveS;
      dispatch(next++);
    }
  }
  result.endS = nowS;
  result.busyS = engines.map((e) => e.busyS);
  result.evictions = engines.reduce((sum, e) => sum + e.cache.evictions, 0);
  return result;
}
