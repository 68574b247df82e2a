import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, healthyOf } from "./rank.ts";
import { kvUsage, lessIsBetter, prefixHitTokens, waitingRequests } from "../scorers.ts";

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

/** Tokens per prefix block: the engine's block size (vLLM's 16) raised to upstream's minimum, 64. */
const PREFIX_BLOCK_TOKENS = 64;
/** Prefix blocks matched at most (`maxPrefixTokensToMatch` 131072 / the block size). */
const MAX_PREFIX_BLOCKS = Math.floor(131_072 / PREFIX_BLOCK_TOKENS);

/**
 * The prefix-cache score: leading prompt blocks held over the prompt's blocks, in whole
 * 64-token blocks (the last, partial block counts when the whole prompt is held), at most
 * 2048 blocks either side; 0 for an empty prompt.
 */
function prefixBlockScore(promptTokens: number, candidate: Candidate): number {
  const total = Math.min(Math.ceil(promptTokens / PREFIX_BLOCK_TOKENS), MAX_PREFIX_BLOCKS);
  if (total === 0) return 0;
  const hit = prefixHitTokens(promptTokens, candidate);
  const matched = hit >= promptTokens
    ? total
    : Math.min(Math.floor(hit / PREFIX_BLOCK_TOKENS), MAX_PREFIX_BLOCKS);
  return matched / total;
}

/**
 * llm-d's default scheduling profile, as the EndpointPicker (llm-d/llm-d-inference-scheduler, now
 * llm-d/llm-d-router, which absorbed the Gateway API Inference Extension's EPP) builds it when
 * given no config: llm-d/llm-d-router@v0.10.0 (71f4f0999f95b96c49a9d0c4afbd18dfdb943c26)
 * `pkg/epp/config/loader/defaults.go` (`loadDefaultConfig`, the same weights as the chart's
 * `config/charts/routerlib/templates/_config.yaml`), scored by
 * `pkg/epp/scheduling/scheduler_profile.go` and picked by
 * `pkg/epp/framework/plugins/scheduling/picker/maxscore/picker.go`. No filter; each scorer's score
 * is clamped to [0, 1] and the weighted scores are summed (not divided by the weights' sum, 7);
 * `max-score-picker` shuffles, then takes the highest total, so ties go at random:
 *
 * - `prefix-cache-scorer` ×3 (`scorer/prefix/plugin.go`, `matchLengthWeight` 0): matched blocks /
 *   the prompt's blocks, from `approx-prefix-cache-producer`
 *   (`requestcontrol/dataproducer/approximateprefix`): blocks of the engine's block size but at
 *   least 64 tokens (`minBlockSizeTokens`), the last partial block included, at most 131072
 *   tokens (2048 blocks) hashed, a match being the leading blocks in a row;
 * - `queue-scorer` ×2 (`scorer/queuedepth/queue.go`): (max − queue) / (max − min) of the waiting
 *   queue over the candidates, 1 for everyone when all queues are equal;
 * - `kv-cache-utilization-scorer` ×2 (`scorer/kvcacheutilization`): 1 − KV cache usage.
 *
 * Every score is recorded negated (lower is better for every tidegate policy), so `score` is
 * −(weighted sum). Signals derived from the Candidate, and the differences they force:
 * - the prefix is `localPrefixTokens`, the engines' real caches; upstream's producer approximates
 *   them from its own routing history (an LRU per pod sized to the engine's KV blocks). Blocks are
 *   64 tokens (vLLM's 16 raised to the minimum) since the Candidate carries no block size.
 * - the waiting queue is `waitingPrefillRequests` (requests without their first token, the one
 *   in prefill included; when absent, `waitingPrefillTokens` in 8k-token requests); upstream
 *   scrapes the engine's `vllm:num_requests_waiting`, which leaves out the request in prefill.
 * - KV usage is (`waitingPrefillTokens` + `runningRequests × runningRequestTokens`) /
 *   `kvCapacityTokens`, capped at 1, because the Candidate carries no engine-reported
 *   `vllm:kv_cache_usage_perc`. 1.5M tokens is LLaMA3-70B's KV (320 KB/token) in 8×80 GB less the
 *   weights.
 * - metrics are the dispatcher's own account at decision time, not a scrape some milliseconds old.
 * Flow control (the EPP's queueing, off by default: `flowControl` feature gate) is admission,
 * not this choice. Randomness only from `context.random`.
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
        const prefix = prefixBlockScore(prompt, candidate);
        const usage = kvUsage(candidate, perRunning, capacity);
        const draw = context.random();
        return {
          terms: {
            prefixCacheScore: -wPrefix * prefix,
            queueScore: -wQueue * queueScore(candidate),
            kvCacheUtilizationScore: -wKv * (1 - usage),
          },
          tieBreaks: [draw],
          detail: {
            prefixScore: prefix,
            waitingQueue: waitingRequests(candidate),
            kvUsage: usage,
            tieBreakDraw: draw,
          },
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
