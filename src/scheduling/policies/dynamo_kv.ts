import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, demotionPenalty, healthyOf } from "./rank.ts";
import { kvTokens, prefixHitTokens } from "../scorers.ts";

export interface DynamoKvOptions {
  /**
   * `overlap_score_weight` (default 1): upstream's deprecated name for `prefill_load_scale`, the
   * weight of the cache-credited prefill blocks against the decode blocks; 0 also sets
   * `overlap_score_credit` to 0 (the prefix is ignored).
   */
  overlapScoreWeight?: number;
  /** `router_temperature`: 0 picks the lowest cost; above 0 samples a softmax of it (default 0). */
  routerTemperature?: number;
  /** KV tokens a running (decoding) request is taken to hold (default 8192). */
  runningRequestTokens?: number;
}

/** Dynamo counts in KV blocks of the backend's size; vLLM's default is 16 tokens. */
const BLOCK_TOKENS = 16;

/**
 * NVIDIA Dynamo's KV router, default worker selection:
 * ai-dynamo/dynamo@07a6c9ce3bb096cfaf353fe69ee578e105c6a512
 * `lib/kv-router/src/scheduling/selector/default.rs` (`DefaultWorkerScorer::worker_logit`,
 * `pick_default_worker`), `selector/mod.rs` (`WorkerSelectionInput::row`, the load and cache
 * inputs) and the defaults of `KvRouterConfig` in `lib/kv-router/src/scheduling/config.rs`
 * (`overlap_score_credit` 1, `overlap_score_credit_decay` 0, `prefill_load_scale` 1,
 * `decode_active_request_weight` 0, `router_temperature` 0, `router_assume_kv_reuse` true,
 * `router_track_output_blocks` false, `router_queue_threshold` unset). The same cost as the
 * released docs (docs.nvidia.com/dynamo v1.5+, "Routing Concepts"); it lived in
 * `lib/llm/src/kv_router/scheduler.rs` (`DefaultWorkerSelector::select_worker`, which broke ties
 * on the smaller radix tree) before the router became `lib/kv-router`. Per worker, lower is
 * better:
 *
 *   cost = prefill_load_scale · max(raw_prefill_blocks − overlap_score_credit · overlap_blocks, 0)
 *        + decode_blocks
 *
 * - raw_prefill_blocks: (the worker's prompt tokens in flight + this request's prompt tokens) /
 *   block size, fractional.
 * - overlap_blocks: whole blocks of the prompt the worker holds, from token 0.
 * - decode_blocks: the KV blocks of the worker's live requests (prompt blocks; output blocks are
 *   not tracked by default) plus this request's whole blocks that those requests do not already
 *   hold (`additional_active_blocks`).
 * - `overlapScoreWeight` w is upstream's deprecated `overlap_score_weight`: it sets
 *   `prefill_load_scale` to w, and w = 0 sets `overlap_score_credit` to 0.
 * - temperature 0: the lowest cost, ties broken uniformly at random. Above 0: one worker sampled
 *   with probability ∝ exp(−((cost − min) / (max − min)) / temperature) (uniform when all costs
 *   are equal); the others follow by cost (the proxy's retry list).
 *
 * Signals derived from the Candidate (Dynamo tracks them itself from its own routing and the
 * engines' KV events): the prompt tokens in flight are `waitingPrefillTokens` (the uncached
 * prompt tokens of requests without their first token, Dynamo's `active_prefill_tokens`); the
 * overlap is `localPrefixTokens` (the engines' real caches, as KV events report them). Forced
 * differences:
 * - the live requests' blocks are `(waitingPrefillTokens + runningRequests × runningRequestTokens)`
 *   / block size: the Candidate carries no per-request prompt size, nor the block hashes Dynamo
 *   deduplicates shared prefixes with.
 * - which of this request's blocks the live requests already hold: the held prefix when the
 *   worker has any live request, none when it is idle (exact for an idle worker: its cached prefix
 *   lowers the prefill cost only).
 * - the block size is 16 (vLLM's default) for lack of the backend's.
 * Randomness only from `context.random`.
 */
export function dynamoKv(options: DynamoKvOptions = {}): Policy {
  const weight = options.overlapScoreWeight ?? 1;
  const prefillLoadScale = weight;
  const overlapScoreCredit = weight === 0 ? 0 : 1;
  const temperature = options.routerTemperature ?? 0;
  const perRunning = options.runningRequestTokens ?? 8192;
  return {
    name: "dynamo_kv",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const requestBlocks = Math.floor(prompt / BLOCK_TOKENS);
      const healthy = healthyOf(candidates);
      const parts = (c: Candidate) => {
        const cached = prefixHitTokens(prompt, c);
        const overlapBlocks = Math.floor(cached / BLOCK_TOKENS);
        const inFlight = Math.max(0, c.waitingPrefillTokens);
        const rawPrefillBlocks = (inFlight + prompt) / BLOCK_TOKENS;
        const prefillBlocks = prefillLoadScale *
          Math.max(rawPrefillBlocks - overlapScoreCredit * overlapBlocks, 0);
        const live = inFlight > 0 || (c.waitingPrefillRequests ?? 0) > 0 || c.runningRequests > 0;
        const additionalBlocks = requestBlocks - (live ? overlapBlocks : 0);
        const decodeBlocks = kvTokens(c, perRunning) / BLOCK_TOKENS + additionalBlocks;
        return { prefillBlocks, decodeBlocks, cached, overlapBlocks, additionalBlocks };
      };
      const logits = healthy.map((c) => {
        const p = parts(c);
        return p.prefillBlocks + p.decodeBlocks;
      });
      const sampled = temperature > 0 ? softmaxSample(logits, temperature, context.random()) : -1;
      const penalty = sampled >= 0 ? demotionPenalty(logits) : 0;
      return buildDecision("dynamo_kv", candidates, (candidate, i) => {
        const p = parts(candidate);
        const draw = context.random();
        const terms: Record<string, number> = {
          weightedPrefillBlocks: p.prefillBlocks,
          decodeBlocks: p.decodeBlocks,
        };
        if (sampled >= 0) terms.unsampled = i === sampled ? 0 : penalty;
        return {
          terms,
          tieBreaks: [draw],
          detail: {
            overlapTokens: p.cached,
            overlapBlocks: p.overlapBlocks,
            additionalBlocks: p.additionalBlocks,
            tieBreakDraw: draw,
          },
        };
      });
    },
  };
}

/** Index drawn with probability ∝ exp(−(logit / range) / temperature) (uniform if all equal). */
function softmaxSample(logits: readonly number[], temperature: number, u: number): number {
  if (logits.length === 0) return -1;
  const min = Math.min(...logits), max = Math.max(...logits);
  if (min === max) return Math.min(logits.length - 1, Math.floor(u * logits.length));
  const range = max - min;
  const scaled = logits.map((v) => -(v / range) / temperature);
  const top = Math.max(...scaled);
  const weights = scaled.map((v) => Math.exp(v - top));
  const total = weights.reduce((a, b) => a + b, 0);
  let cumulative = 0;
  for (let i = 0; i < weights.length; i++) {
    cumulative += weights[i] / total;
    if (u <= cumulative) return i;
  }
  return logits.length - 1;
}

export const dynamoKvPolicy = policyFactory({
  name: "dynamo_kv",
  summary: "NVIDIA Dynamo's KV router: the lowest weighted prefill and decode blocks",
  params: z.strictObject({
    overlapScoreWeight: z.number().min(0).optional(),
    routerTemperature: z.number().min(0).optional(),
    runningRequestTokens: z.number().positive().optional(),
  }),
  create: (params) => dynamoKv(params),
});
