import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, healthyOf } from "./rank.ts";
import { kvUsage, lessIsBetter, prefixMatchRate, waitingRequests } from "../scorers.ts";

export interface LlmdDefaultOptions {
  /** Weight of `prefix-cache-scorer` (default 3). */
  prefixCacheWeight?: number;
  /** Weight of `queue-scorer` (default 2). */
  queueWeight?: number;
  /** Weight of `kv-cache-utilization-scorer` (default 2). */
  kvCacheUtilizationWeight?: number;
  /** GPU KV capacity of one instance in tokens, for the utilisation estimate (default 1.5M). */
  kvCapacityTokens?: number;
  /** KV tokens a running (decoding) request is taken to hold (default 8192). */
  runningRequestTokens?: number;
}

/**
 * llm-d's default inference scheduling (llm-d/llm-d `guides/inference-scheduling`, the
 * EndpointPickerConfig of llm-d/llm-d-inference-scheduler over the Gateway API Inference
 * Extension scorers): a weighted sum of three scorers, each in [0, 1], highest total wins
 * (`max-score-picker`, ties at random):
 *
 * - `prefix-cache-scorer` ×3: matched prefix blocks / the prompt's blocks;
 * - `queue-scorer` ×2: (max − queue) / (max − min) of the waiting queue over the candidates, 1 for
 *   everyone when all queues are equal;
 * - `kv-cache-utilization-scorer` ×2: 1 − KV cache usage.
 *
 * Every score is recorded negated (lower is better for every tidegate policy), so `score` is
 * −(weighted sum). Signals derived from the Candidate: the prefix is `localPrefixTokens` (the
 * engines' real caches, i.e. the precise-prefix-cache flavour; the default scorer approximates it
 * from its own routing history); the waiting queue is `waitingPrefillRequests` (requests the
 * router sent that have not had their first token; when absent, `waitingPrefillTokens` in 8k-token
 * requests); KV usage is (`waitingPrefillTokens` + `runningRequests × runningRequestTokens`) /
 * `kvCapacityTokens`, capped at 1, because the Candidate carries no engine-reported usage. 1.5M
 * tokens is LLaMA3-70B's KV (320 KB/token) in 8×80 GB less the weights. Randomness only from
 * `context.random`.
 */
export function llmdDefault(options: LlmdDefaultOptions = {}): Policy {
  const wPrefix = options.prefixCacheWeight ?? 3;
  const wQueue = options.queueWeight ?? 2;
  const wKv = options.kvCacheUtilizationWeight ?? 2;
  const capacity = options.kvCapacityTokens ?? 1_500_000;
  const perRunning = options.runningRequestTokens ?? 8192;
  return {
    name: "llmd_default",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const queueScore = lessIsBetter(healthyOf(candidates), waitingRequests);
      return buildDecision("llmd_default", candidates, (candidate) => {
        const usage = kvUsage(candidate, perRunning, capacity);
        const draw = context.random();
        return {
          terms: {
            prefixCacheScore: -wPrefix * prefixMatchRate(prompt, candidate),
            queueScore: -wQueue * queueScore(candidate),
            kvCacheUtilizationScore: -wKv * (1 - usage),
          },
          tieBreaks: [draw],
          detail: { waitingQueue: waitingRequests(candidate), kvUsage: usage, tieBreakDraw: draw },
        };
      });
    },
  };
}

export const llmdDefaultPolicy = policyFactory({
  name: "llmd_default",
  summary: "llm-d's default: prefix-cache, queue and KV-utilisation scorers, weighted 3:2:2",
  params: z.strictObject({
    prefixCacheWeight: z.number().min(0).optional(),
    queueWeight: z.number().min(0).optional(),
    kvCacheUtilizationWeight: z.number().min(0).optional(),
    kvCapacityTokens: z.number().positive().optional(),
    runningRequestTokens: z.number().positive().optional(),
  }),
  create: (params) => llmdDefault(params),
});
