import { z } from "zod";
import { policyFactory } from "../policy_factory.ts";
import type { Candidate, Decision, Policy, ScheduleContext, ScheduleRequest } from "../types.ts";
import { buildDecision, demotionPenalty, healthyOf } from "./rank.ts";
import { kvTokens, prefixHitTokens } from "../scorers.ts";

export interface DynamoKvOptions {
  /** `overlap_score_weight`: weight of the prefill blocks against the decode blocks (default 1). */
  overlapScoreWeight?: number;
  /** `router_temperature`: 0 picks the lowest cost; above 0 samples a softmax of it (default 0). */
  routerTemperature?: number;
  /** KV tokens a running (decoding) request is taken to hold (default 8192). */
  runningRequestTokens?: number;
}

/** Dynamo counts in KV blocks; the block size only scales the cost (argmin and sampling alike). */
const BLOCK_TOKENS = 16;

/**
 * NVIDIA Dynamo's KV router (ai-dynamo/dynamo, `lib/llm/src/kv_router/scheduler.rs`,
 * `DefaultWorkerSelector::select_worker`, and the defaults of `KvRouterConfig`: overlap weight 1,
 * temperature 0). Per worker, lower is better:
 *
 *   logit = overlap_score_weight · prefill_blocks + decode_blocks
 *
 * - prefill_blocks: the worker's prefill tokens in flight plus this request's tokens beyond the
 *   worker's cached prefix (`isl − overlap·block_size`), over the block size.
 * - decode_blocks: the KV blocks of the worker's active sequences plus this request's new blocks.
 * - temperature 0: the lowest logit, ties broken at random (Dynamo first prefers the smaller
 *   radix tree; the Candidate carries no tree size, so ties go straight to the draw). Above 0: one
 *   worker sampled with probability ∝ exp(−(logit / (max − min)) / temperature), as
 *   `softmax_sample`; the others follow by logit (the proxy's retry list).
 *
 * Signals derived from the Candidate (Dynamo tracks them itself from its own routing and KV
 * events): the prefill tokens in flight are `waitingPrefillTokens` (the dispatch-time account of
 * uncomputed prompt tokens, Dynamo's `active_tokens`); the overlap is `localPrefixTokens`; the
 * active blocks are the in-flight prefill tokens plus `runningRequests × runningRequestTokens`
 * (the Candidate has no per-request KV size), over the block size. Randomness only from
 * `context.random`.
 */
export function dynamoKv(options: DynamoKvOptions = {}): Policy {
  const weight = options.overlapScoreWeight ?? 1;
  const temperature = options.routerTemperature ?? 0;
  const perRunning = options.runningRequestTokens ?? 8192;
  return {
    name: "dynamo_kv",
    select(request: ScheduleRequest, candidates: Candidate[], context: ScheduleContext): Decision {
      const prompt = Math.max(0, request.promptTokens);
      const healthy = healthyOf(candidates);
      const parts = (c: Candidate) => {
        const cached = prefixHitTokens(prompt, c);
        const newTokens = prompt - cached;
        const inFlight = Math.max(0, c.waitingPrefillTokens);
        const prefillBlocks = (inFlight + newTokens) / BLOCK_TOKENS;
        const decodeBlocks = (kvTokens(c, perRunning) + newTokens) / BLOCK_TOKENS;
        return { prefillBlocks, decodeBlocks, cached };
      };
      const logits = healthy.map((c) => {
        const p = parts(c);
        return weight * p.prefillBlocks + p.decodeBlocks;
      });
      const sampled = temperature > 0 ? softmaxSample(logits, temperature, context.random()) : -1;
      const penalty = sampled >= 0 ? demotionPenalty(logits) : 0;
      return buildDecision("dynamo_kv", candidates, (candidate, i) => {
        const p = parts(candidate);
        const draw = context.random();
        const terms: Record<string, number> = {
          weightedPrefillBlocks: weight * p.prefillBlocks,
          decodeBlocks: p.decodeBlocks,
        };
        if (sampled >= 0) terms.unsampled = i === sampled ? 0 : penalty;
        return {
          terms,
          tieBreaks: [draw],
          detail: { overlapTokens: p.cached, tieBreakDraw: draw },
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
