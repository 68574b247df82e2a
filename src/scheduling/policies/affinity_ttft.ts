import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import { prefillTimeS } from "../prefill_model.ts";
import { estimateQueueS, estimateTtft, type TtftModelParams } from "../ttft_estimate.ts";
import type {
  Candidate,
  Decision,
  Policy,
  PrefillModelCoefficients,
  ScheduleContext,
  ScheduleRequest,
} from "../types.ts";
import { heldPrefixTokens, homeOf } from "../prefix_home.ts";
import { buildDecision, healthyOf } from "./rank.ts";

export interface AffinityTtftOptions {
  /**
   * Weight of the duplication term when only instances hold the prefix (no pool to load it from):
   * a candidate that does not hold it pays `weight ×` the seconds recomputing it takes, for the
   * cache space the copy takes and the work it adds. Large: a document moves only off a holder
   * overloaded by more than that.
   */
  duplicationWeight?: number;
  /**
   * The same weight when the pool holds the prefix and any instance can load it, on an idle
   * cluster: a copy is then a cheap transfer, and replicating a hot prefix to an idle instance
   * pays. It rises to `duplicationWeight` as the cluster's queues grow past a copy's cost, where
   * the churn of copies would feed the overload.
   */
  poolDuplicationWeight?: number;
  /**
   * When set, a copy of a prefix only instances hold is weighed by the candidate's own queue:
   * `localPressureWeight / (1 − pressure)` up to `duplicationWeight`, pressure being the
   * candidate's queue against the copy's recompute. An idle instance then takes a hot prefix
   * off a holder queued past about twice its recompute; a busy one pays up to the flat weight.
   * Unset: the flat `duplicationWeight` (docs/real_policy_comparison.md compares them).
   */
  localPressureWeight?: number;
  /**
   * Weight of the home term: a candidate other than the new part's home (prefix_home.ts) pays
   * `homeWeight × pressure³ ×` the seconds computing that part takes, pressure being the
   * cluster's queues against it (queuePressure). Nothing on an idle cluster; near saturation a
   * miss goes home unless home is overloaded past that, so each cache holds a share of the
   * prefixes and the hit ratio rises when it counts. 0 turns it off.
   */
  homeWeight?: number;
}

/** Defaults chosen on the training seeds of the policy grid (docs/sim/workloads/README.md). */
export const DEFAULT_DUPLICATION_WEIGHT = 8;
export const DEFAULT_POOL_DUPLICATION_WEIGHT = 0.5;
export const DEFAULT_HOME_WEIGHT = 4;

/**
 * Mooncake's predicted TTFT (Algorithm 1), made sticky (§6.2: keep a prefix where it is unless
 * its holder is overloaded). A candidate that does not hold a prefix some instance holds pays, on
 * top of its TTFT, a duplication term: `weight ×` the seconds recomputing those tokens takes, for
 * the cache space the copy takes (recomputed or loaded from the pool) and the work it adds. A
 * prefix then moves off its holder only when the holder's queue exceeds that cost, and hot
 * prefixes replicate then. The part of a prompt nobody holds has a home (prefix_home.ts): on an
 * idle cluster it breaks ties, and as the queues near saturation a placement elsewhere pays a
 * home term (homeTerm), so that each cache holds a share of the prefixes rather than all of them
 * a little, and the hit ratio rises where work is dearest.
 *
 * The weight: `duplicationWeight` (8) when only instances hold the prefix or engines cannot load
 * from the pool (`poolLoads: false`, the router's view); when the pool holds it and engines load
 * it (a copy is a cheap transfer), `poolDuplicationWeight / (1 − pressure)` up to that, pressure
 * being the cluster's mean queue against a copy's cost (queuePressure): on an idle cluster hot
 * prefixes spread, on a busy one they stay, as extra work is dearer the closer the queues run
 * to saturation.
 *
 * Why: minimizing each request's own TTFT (mooncake_ttft, cache_aware) moves a document off its
 * holder as soon as the holder's queue outweighs its hit; with caches full the copy evicts other
 * documents, the hit ratio falls and the load rises (docs/sim/workloads/README.md measures it).
 */
export function affinityTtft(params: TtftModelParams, options: AffinityTtftOptions = {}): Policy {
  const localWeight = options.duplicationWeight ?? DEFAULT_DUPLICATION_WEIGHT;
  const poolWeight = options.poolDuplicationWeight ?? DEFAULT_POOL_DUPLICATION_WEIGHT;
  const localPressureWeight = options.localPressureWeight;
  const homeWeight = options.homeWeight ?? DEFAULT_HOME_WEIGHT;
  return {
    name: "affinity_ttft",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const held = heldPrefixTokens(request, candidates);
      const model = clusterPrefillModel(candidates, params.prefillModel);
      const shared = { ...params, prefillModel: model };
      // The cluster's mean queue, for both terms that weigh work against it: once per decision.
      let queue: number | undefined;
      const queueS = () => queue ??= meanQueueS(candidates, shared);
      // One weight per decision, so the penalty grows with the duplicated tokens alone.
      const fromPool = request.poolLoads !== false && request.poolPrefixTokens >= held;
      const weight = fromPool
        ? Math.min(localWeight, poolWeight / (1 - pressureOf(queueS(), held, model)))
        : localWeight;
      // But with localPressureWeight a local copy is weighed by the receiving candidate's queue.
      const copyWeight = (candidateQueueS: number) =>
        fromPool || localPressureWeight === undefined ? weight : Math.min(
          localWeight,
          localPressureWeight / (1 - pressureOf(candidateQueueS, held, model)),
        );
      const home = homeTerm(request, candidates, held, shared, homeWeight, queueS);
      return buildDecision("affinity_ttft", candidates, (candidate) => {
        // One model for every instance: per-instance learned ones, noisy early on, herd new
        // prefixes onto whichever instance looks fastest and unbalance the caches.
        const estimate = estimateTtft(request, { ...candidate, prefillModel: undefined }, shared);
        // Recomputed or loaded from the pool, a copy takes the same cache space: what it evicts
        // is priced as recomputing as many tokens (monotone in them, whatever the candidate).
        const local = estimate.reusedTokens - estimate.transferTokens;
        const duplicated = Math.max(0, held - local);
        const duplicationS = duplicated > 0
          ? copyWeight(estimate.queueS) * prefillTimeS(model, duplicated)
          : 0;
        const draw = context.random();
        return {
          terms: {
            queueS: estimate.queueS,
            transferS: estimate.transferS,
            prefillS: estimate.prefillS,
            duplicationS,
            homeS: candidate.id === home.id ? 0 : home.offHomeS,
          },
          // Among equals a new prefix goes home, idle cluster or not.
          tieBreaks: [candidate.id === home.id ? 0 : 1, draw],
          transferTokens: estimate.transferTokens,
          detail: {
            localPrefixTokens: local,
            transferTokens: estimate.transferTokens,
            duplicatedTokens: duplicated,
            home: candidate.id === home.id ? 1 : 0,
            tieBreakDraw: draw,
          },
        };
      }, false);
    },
  };
}

/**
 * The cluster's prefill model: the mean of the instances' learned models where they have one
 * (on the hardware they run on: a CPU engine is many times slower than the prior's GPU), else
 * the prior. Averaged, not per instance, so that estimation noise cannot herd placements.
 */
export function clusterPrefillModel(
  candidates: readonly Candidate[],
  prior: PrefillModelCoefficients,
): PrefillModelCoefficients {
  const learned = healthyOf(candidates).flatMap((c) => c.prefillModel ? [c.prefillModel] : []);
  if (learned.length === 0) return prior;
  const mean = (f: (m: PrefillModelCoefficients) => number | undefined) =>
    learned.reduce((sum, m) => sum + (f(m) ?? 0), 0) / learned.length;
  return {
    linear: mean((m) => m.linear),
    quadratic: mean((m) => m.quadratic),
    cachedLinear: mean((m) => m.cachedLinear),
    constant: mean((m) => m.constant),
  };
}

/**
 * How busy the cluster is against the cost of some work, in [0, 1): the mean queue q over the
 * healthy candidates as q / (q + the seconds computing `heldTokens` takes: a copy of the held
 * prefix, or the new part homeTerm places). 0 when idle.
 */
export function queuePressure(
  candidates: readonly Candidate[],
  heldTokens: number,
  params: TtftModelParams,
): number {
  return pressureOf(meanQueueS(candidates, params), heldTokens, params.prefillModel);
}

/** The mean estimated queue over the healthy candidates, in seconds (0 when none is healthy). */
export function meanQueueS(candidates: readonly Candidate[], params: TtftModelParams): number {
  const healthy = healthyOf(candidates);
  if (healthy.length === 0) return 0;
  return healthy.reduce((sum, c) => sum + estimateQueueS(c, params.prefillModel, params), 0) /
    healthy.length;
}

/** `queueS / (queueS +` the seconds computing `tokens` takes), 0 for no tokens or no queue. */
function pressureOf(queueS: number, tokens: number, model: PrefillModelCoefficients): number {
  if (tokens <= 0 || queueS <= 0) return 0;
  return queueS / (queueS + prefillTimeS(model, tokens));
}

/**
 * The new part's home and what a placement elsewhere pays: `weight × pressure³ ×` the seconds
 * computing the part no instance holds. Cubed so that a cluster short of saturation (pressure
 * well below 1) keeps placing by TTFT: on the grid's training seeds a flat term was 2.29× the
 * best peer in its worst cell, and a squared one 5% behind at 0.5× load
 * (docs/sim/workloads/README.md).
 */
export function homeTerm(
  request: ScheduleRequest,
  candidates: readonly Candidate[],
  heldTokens: number,
  params: TtftModelParams,
  weight: number,
  queueS: () => number = () => meanQueueS(candidates, params),
): { id?: string; offHomeS: number } {
  const none = { offHomeS: 0 };
  if (!(weight > 0) || request.homeKey === undefined) return none;
  const id = homeOf(request.homeKey, candidates);
  const unheld = request.promptTokens - heldTokens;
  if (id === undefined || unheld <= 0) return none;
  const pressure = pressureOf(queueS(), unheld, params.prefillModel);
  return { id, offHomeS: weight * pressure ** 3 * prefillTimeS(params.prefillModel, unheld) };
}

export const affinityTtftPolicy = policyFactory({
  name: "affinity_ttft",
  summary: "Mooncake's predicted TTFT plus the cost of moving a prefix off its holder or home",
  params: z.strictObject({
    /** Weight of copying a prefix only instances hold (default 8). */
    duplicationWeight: z.number().min(0).optional(),
    /** Weight of copying a prefix the pool holds (default 0.5). */
    poolDuplicationWeight: z.number().min(0).optional(),
    /** A copy to an idle instance costs this weight, to a busy one up to duplicationWeight. */
    localPressureWeight: z.number().min(0).optional(),
    /** Weight of placing a new prefix off its home near saturation (default 4; 0: off). */
    homeWeight: z.number().min(0).optional(),
  }),
  create: (params, ttft) => affinityTtft(ttft, params),
});
