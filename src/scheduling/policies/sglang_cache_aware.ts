import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, demotionPenalty, healthyOf } from "./rank.ts";
import { prefixMatchRate, requestLoad } from "../scorers.ts";

export interface SglangCacheAwareOptions {
  /** `cache_threshold`: prefix match rate above which the best match wins (default 0.3). */
  cacheThreshold?: number;
  /** `balance_abs_threshold`: load spread (requests) for imbalance (default 64). */
  balanceAbsThreshold?: number;
  /** `balance_rel_threshold`: max load over min load for imbalance (default 1.5). */
  balanceRelThreshold?: number;
}

/**
 * SGLang's router `cache_aware` policy, as the SGLang Model Gateway (SMG, formerly
 * sgl-project/sglang `sgl-router/`, now its own repository) ships it in its latest release:
 * smg-project/smg@v1.9.0 (106ffacd6228a67920a5db58628f61751c7c49e2)
 * `model_gateway/src/policies/cache_aware.rs` (`CacheAwarePolicy::select_worker`, the HTTP
 * string-tree path); defaults from `model_gateway/src/main.rs` and
 * `bindings/python/src/smg/router_args.py` (cache_threshold 0.3, balance_abs_threshold 64,
 * balance_rel_threshold 1.5; the KV-usage triggers `balance_token_usage_threshold` and
 * `overload_token_usage_threshold` default to 1.0, i.e. off). Per request, over the healthy
 * workers:
 *
 * 1. Imbalanced (max load − min load > abs AND max load > rel × min load, both strict): the
 *    least-loaded worker.
 * 2. Else, with the best prefix match rate (matched / prompt, 0 for an empty prompt) strictly
 *    above `cache_threshold`: a worker holding that match, whatever its load; if that worker is
 *    unhealthy, the first healthy worker (input order).
 * 3. Else: the least-loaded worker. (Until sgl-project/sglang#14650, December 2025, a miss went
 *    to the worker with the smallest approximate tree; it is the least-loaded one since.)
 *
 * Signals derived from the Candidate, and what they stand for: the load is
 * `waitingPrefillRequests + runningRequests` (SMG's `Worker::load()`, the requests it sent that
 * have not finished; when the first is absent, `waitingPrefillTokens` in 8k-token requests); the
 * match is `localPrefixTokens` over every candidate passed in, unhealthy ones too.
 *
 * Differences kept, forced by what a Candidate carries:
 * - SMG matches against its own approximate radix tree of the text it routed (characters, LRU
 *   eviction), which knows every worker it ever routed to; the Candidate carries the engines' real
 *   cached prefix in tokens instead.
 * - Several workers holding the best match: SMG takes the one the tree node remembers (fixed, not
 *   chosen by load); the Candidate carries no tree, so a draw from `context.random` picks one.
 * - Ties on the least load: SMG breaks them by fewer requests ever routed (`processed_requests`),
 *   then index, which rotates among tied workers; the Candidate has no such count, so a draw.
 * - The KV-usage triggers (off by default) and the event-driven mode (gRPC workers publishing KV
 *   events: highest block overlap, ties by load, no threshold) are not modelled.
 * - Not yet released (smg-project/smg main, e190554, August 2026): the fleet-wide count check
 *   becomes a per-request gate on the chosen worker against the mean load, and the least-loaded
 *   matched worker is taken; this follows v1.9.0.
 *
 * SMG routes to one worker; the others follow by the mode's key (the proxy's retry list): load
 * then a draw, or match rate then load then a draw. Randomness only from `context.random`.
 */
export function sglangCacheAware(options: SglangCacheAwareOptions = {}): Policy {
  const cacheThreshold = options.cacheThreshold ?? 0.3;
  const absThreshold = options.balanceAbsThreshold ?? 64;
  const relThreshold = options.balanceRelThreshold ?? 1.5;
  return {
    name: "sglang_cache_aware",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const load = requestLoad;
      const rate = (c: Candidate) => prefixMatchRate(prompt, c);
      const healthy = healthyOf(candidates);
      const loads = healthy.map(load);
      const maxLoad = Math.max(0, ...loads), minLoad = Math.min(...loads);
      const imbalanced = maxLoad - minLoad > absThreshold && maxLoad > minLoad * relThreshold;
      const bestRate = Math.max(0, ...candidates.map(rate));
      const cacheHit = !imbalanced && bestRate > cacheThreshold;
      // The worker the match routes to: one of the holders of the best match; when it is down,
      // SMG falls back to the first healthy worker.
      let target: Candidate | undefined;
      if (cacheHit) {
        const holders = candidates.filter((c) => rate(c) === bestRate);
        const held =
          holders[Math.min(holders.length - 1, Math.floor(context.random() * holders.length))];
        target = held.healthy ? held : healthy[0];
      }
      const penalty = demotionPenalty(healthy.map((c) => -rate(c)));
      return buildDecision("sglang_cache_aware", candidates, (candidate) => {
        const draw = context.random();
        const terms: Record<string, number> = cacheHit
          ? {
            negativeMatchRate: -rate(candidate),
            notMatchTarget: candidate === target ? 0 : penalty,
          }
          : { loadRequests: load(candidate) };
        return {
          terms,
          tieBreaks: cacheHit ? [load(candidate), draw] : [draw],
          detail: {
            imbalanced: imbalanced ? 1 : 0,
            cacheHit: cacheHit ? 1 : 0,
            matchRate: rate(candidate),
            loadRequests: load(candidate),
            tieBreakDraw: draw,
          },
        };
      });
    },
  };
}

export const sglangCacheAwarePolicy = policyFactory({
  name: "sglang_cache_aware",
  summary: "SGLang router's cache_aware: balance past an imbalance, else the best prefix match",
  params: z.strictObject({
    cacheThreshold: z.number().min(0).max(1).optional(),
    balanceAbsThreshold: z.number().min(0).optional(),
    balanceRelThreshold: z.number().min(0).optional(),
  }),
  create: (params) => sglangCacheAware(params),
});
