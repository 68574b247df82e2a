/**
 * The decode side of the P/D simulator with conditional disaggregation (docs/disaggregation.md):
 * each decode instance is an engine that can also prefill. It is built from the neutral engine's
 * parts (neutral_engine.ts, unchunked): a local prefill runs whole while the instance's batch
 * steps wait, as a prefill-first scheduler does, and its prefix cache is a `BlockCache` the size
 * of the instance's KV memory. With no local prefill queued it steps exactly as a plain decode
 * engine. The decision is the router's (`decideLocalPrefill`); this file only feeds it. Pure.
 */
import type { LoadAccount } from "../cluster/load_account.ts";
import type { DecodeModel } from "../scheduling/decode_model.ts";
import {
  decideLocalPrefill,
  type LocalPrefillMode,
  type LocalPrefillVerdict,
} from "../scheduling/local_prefill.ts";
import type { TtftModelParams } from "../scheduling/ttft_estimate.ts";
import type { Candidate, PrefillModelCoefficients } from "../scheduling/types.ts";
import { BlockCache } from "./block_cache.ts";
import { SimDecodeEngine } from "./decode_engine.ts";
import { SimNeutralEngine } from "./neutral_engine.ts";
import { SimPrefillEngine } from "./prefill_engine.ts";

/** A run's conditional disaggregation (`--local-prefill`, `--local-prefill-tokens`). */
export interface LocalPrefillSetting {
  mode: LocalPrefillMode;
  /** Uncached tokens up to which the decode instance prefills itself (the router's maxTokens). */
  maxTokens: number;
  /** The decode engines' prefill tokens per step (the router's chunkTokens); unset: unchunked. */
  chunkTokens?: number;
}

export interface DecodeSideConfig {
  engineModel: PrefillModelCoefficients;
  engineDecodeModel: DecodeModel;
  blockTokens: number;
  decodeKvCapacityTokens: number;
  decodeMaxBatch?: number;
  ttft: TtftModelParams;
}

/**
 * One engine per decode instance: the decode engine plus a prefill engine (the prefill instances'
 * true time model, no slowdown) whose cache is the instance's KV memory in blocks. Unchunked
 * unless `chunkTokens` is given: then each decode step also computes up to that many prefill
 * tokens, as a chunked-prefill engine does.
 */
export function decodeSideEngines(
  names: readonly string[],
  config: DecodeSideConfig,
  onGap: (gapS: number) => void,
  chunkTokens?: number,
): SimNeutralEngine[] {
  const blocks = Math.max(1, Math.floor(config.decodeKvCapacityTokens / config.blockTokens));
  return names.map((name) => {
    const prefill = new SimPrefillEngine(name, new BlockCache(blocks), {
      model: config.engineModel,
      slowdown: 1,
      chunkTokens: chunkTokens ?? Number.POSITIVE_INFINITY,
      unchunked: chunkTokens === undefined,
      blockTokens: config.blockTokens,
      kvBytesPerToken: config.ttft.kvBytesPerToken,
      transferBytesPerS: config.ttft.transferBytesPerS,
    }, () => 0);
    const decode = new SimDecodeEngine(name, config.engineDecodeModel, {
      onGap,
      maxBatch: config.decodeMaxBatch,
    });
    return new SimNeutralEngine(prefill, decode, chunkTokens !== undefined);
  });
}

/** Prompt tokens the engine's cache holds, counted from token 0. */
export function heldPrefixTokens(
  engine: SimNeutralEngine,
  hashIds: readonly number[],
  promptTokens: number,
  blockTokens: number,
): number {
  return Math.min(engine.cache.prefixLength(hashIds) * blockTokens, promptTokens);
}

/** A remote prefill's KV now lives on the decode instance: later requests can hit it there. */
export function keepArrivedPrefix(engine: SimNeutralEngine, hashIds: readonly number[]): void {
  for (const block of hashIds) engine.cache.insert(block);
}

/**
 * The chosen decode instance seen as a prefill candidate, as the router builds it (pd_plan.ts):
 * its own prefix, the prefill work and decoding requests the router's account holds for it.
 */
export function decodeAsPrefillCandidate(
  name: string,
  account: LoadAccount,
  localPrefixTokens: number,
): Candidate {
  const load = account.load(name);
  return {
    id: name,
    healthy: true,
    localPrefixTokens,
    waitingPrefillTokens: load.prefillTokens,
    waitingPrefillRequests: load.prefillRequests,
    runningRequests: load.decodeRequests,
  };
}

/**
 * The router's verdict for one request (the same `decideLocalPrefill`, not a copy). The
 * simulator's decode engines read only their own cache, never the pool: no `pool` input.
 */
export function localPrefillVerdict(
  setting: LocalPrefillSetting,
  decode: Candidate,
  request: { promptTokens: number; remoteTtftS: number },
  model: { ttft: TtftModelParams; decodeModel: DecodeModel; tbtSloS?: number },
): LocalPrefillVerdict {
  return decideLocalPrefill(
    { promptTokens: request.promptTokens, decode, remoteTtftS: request.remoteTtftS },
    {
      mode: setting.mode,
      maxLocalTokens: setting.maxTokens,
      ttft: model.ttft,
      decodeModel: model.decodeModel,
      tbtSloS: model.tbtSloS,
      chunkTokens: setting.chunkTokens,
    },
  );
}

/**
 * Tokens a prefill instance computed that the request's decode instance already held when the
 * request arrived: work the decode instance would not have had to redo (part of the wasted count).
 */
export function redundantPrefillTokens(
  heldByDecode: number,
  cachedOnPrefill: number,
  computedOnPrefill: number,
): number {
  return Math.max(0, Math.min(heldByDecode - cachedOnPrefill, computedOnPrefill));
}
