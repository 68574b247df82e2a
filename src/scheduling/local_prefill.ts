/**
 * Conditional disaggregation: whether a request on a disaggregated model prefills on its decode
 * instance itself instead of on a prefill instance. Dynamo's rule is the simple mode: prefill
 * locally when the prompt part the decode instance does not hold is short (`threshold`). The
 * `predicted` mode also compares the two TTFTs with the router's model: a remote prefill costs the
 * best prefill instance's queue and prefill plus moving the prompt's KV to the decode instance; a
 * local one costs the decode instance's own queued prefill work, its prefill from its own prefix
 * (and the pool's, where its engine loads it by itself), and the decode step its running batch
 * takes meanwhile. In every mode, with a TBT SLO, a decode
 * instance that is decoding prefills locally only when the pause its prefill puts between its
 * running requests' tokens (the prefill plus one step) fits the SLO: an engine's prefill holds
 * back its batch's next step. An engine with chunked prefill (`chunkTokens`, vLLM's
 * `--max-num-batched-tokens`) computes a chunk with each decode step instead: the pause is then
 * its costliest chunk (the last, with the longest context) plus the step, and the local TTFT gains
 * a step per chunk, its own and those of the prefill work queued there. Pure.
 */
import type { AdmissionVerdict } from "./admission.ts";
import { type DecodeModel, decodeStepS } from "./decode_model.ts";
import { prefillTimeS } from "./prefill_model.ts";
import { estimateTtft, type TtftEstimate, type TtftModelParams } from "./ttft_estimate.ts";
import type { Candidate } from "./types.ts";

export const LOCAL_PREFILL_MODES = ["off", "threshold", "predicted"] as const;
export type LocalPrefillMode = typeof LOCAL_PREFILL_MODES[number];

export interface LocalPrefillInputs {
  promptTokens: number;
  /**
   * Prompt tokens the shared pool holds, from token 0, and whether the engines load them on a miss
   * (`kv.poolLoads`): a local prefill then reuses them too. Absent: its own prefix only.
   */
  pool?: { prefixTokens: number; loads: boolean };
  /** The chosen decode instance seen as a prefill candidate (its own prefix, its queued work). */
  decode: Candidate;
  /** The best prefill instance's predicted TTFT (queue, transfer from the pool, prefill). */
  remoteTtftS?: number;
}

export interface LocalPrefillOptions {
  mode: LocalPrefillMode;
  /** Uncached tokens up to which the decode instance prefills itself in every mode. */
  maxLocalTokens: number;
  ttft: TtftModelParams;
  decodeModel: DecodeModel;
  /** The model's TBT SLO in seconds (unset: the pause a local prefill causes is not judged). */
  tbtSloS?: number;
  /** Prefill tokens the decode engine computes per step (unset: a prefill runs whole). */
  chunkTokens?: number;
}

export interface LocalPrefillVerdict {
  local: boolean;
  /** Prompt tokens the decode instance does not hold. */
  uncachedTokens: number;
  /** The local prefill's predicted TTFT (when local, or compared in `predicted` mode). */
  localTtftS?: number;
  /** The remote one it was compared with (`predicted` mode, past the threshold). */
  remoteTtftS?: number;
  reason:
    | "off"
    | "short_suffix"
    | "long_suffix"
    | "local_faster"
    | "remote_faster"
    | "no_remote_estimate"
    | "decode_stall";
  /** The pause a local prefill would put in the running batch (judged against the TBT SLO). */
  stallS?: number;
}

export function decideLocalPrefill(
  inputs: LocalPrefillInputs,
  options: LocalPrefillOptions,
): LocalPrefillVerdict {
  const prompt = Math.max(0, inputs.promptTokens);
  const loads = inputs.pool?.loads ?? false;
  // An engine that loads from the pool takes all it holds: no balancing threshold to pass.
  const own = estimateTtft(
    { promptTokens: prompt, poolPrefixTokens: loads ? inputs.pool!.prefixTokens : 0 },
    inputs.decode,
    loads ? { ...options.ttft, balancingThreshold: 1 } : options.ttft,
    { allowTransfer: loads },
  );
  const uncachedTokens = localUncachedTokens(prompt, inputs.decode.localPrefixTokens, inputs.pool);
  if (options.mode === "off") return { local: false, uncachedTokens, reason: "off" };
  const stepS = decodeStepS(options.decodeModel, inputs.decode.runningRequests + 1);
  const { pauseS, chunks } = localPrefillPause(own, inputs.decode, options);
  const stallS = pauseS + stepS;
  const localTtftS = own.totalS + chunks * stepS;
  if (
    options.tbtSloS !== undefined && inputs.decode.runningRequests > 0 &&
    stallS > options.tbtSloS
  ) {
    return { local: false, uncachedTokens, stallS, reason: "decode_stall" };
  }
  if (uncachedTokens <= options.maxLocalTokens) {
    return { local: true, uncachedTokens, localTtftS, reason: "short_suffix" };
  }
  if (options.mode === "threshold") return { local: false, uncachedTokens, reason: "long_suffix" };
  if (inputs.remoteTtftS === undefined) {
    return { local: false, uncachedTokens, reason: "no_remote_estimate" };
  }
  const kvTransferS = prompt * options.ttft.kvBytesPerToken / options.ttft.transferBytesPerS;
  const remoteTtftS = inputs.remoteTtftS + kvTransferS;
  const local = localTtftS <= remoteTtftS;
  return {
    local,
    uncachedTokens,
    localTtftS,
    remoteTtftS,
    reason: local ? "local_faster" : "remote_faster",
  };
}

/**
 * Prompt tokens a decode instance computes to prefill a request itself: past its own prefix and,
 * where its engine loads the pool's part by itself, past the pool's (such a load, as any reuse,
 * leaves the last token to compute).
 */
export function localUncachedTokens(
  promptTokens: number,
  ownPrefixTokens: number,
  pool?: { prefixTokens: number; loads: boolean },
): number {
  const prompt = Math.max(0, promptTokens);
  const fromPool = pool?.loads ? Math.min(pool.prefixTokens, prompt - 1) : 0;
  const held = Math.max(ownPrefixTokens, fromPool);
  return Math.max(0, prompt - Math.min(held, prompt));
}

/**
 * The longest prefill pause between two decode steps, and how many steps the prefill spans. A
 * chunk's pause is what its tokens add to the prefill's cost, priced as the prompt's last
 * `chunkTokens` (the longest context: an upper bound for every chunk); the per-pass terms belong to
 * the step it shares. Prefill work already queued there is computed a chunk per step too, ahead.
 */
function localPrefillPause(
  own: TtftEstimate,
  decode: Candidate,
  options: LocalPrefillOptions,
): { pauseS: number; chunks: number } {
  const chunk = options.chunkTokens;
  if (chunk === undefined) return { pauseS: own.prefillS, chunks: 1 };
  const model = decode.prefillModel ?? options.ttft.prefillModel;
  const last = Math.min(chunk, own.newTokens);
  const before = prefillTimeS(model, own.newTokens - last, own.reusedTokens);
  const tokens = Math.max(0, decode.waitingPrefillTokens) + own.newTokens;
  return { pauseS: own.prefillS - before, chunks: Math.max(1, Math.ceil(tokens / chunk)) };
}

/**
 * Admission for a request prefilled on its decode instance: a TTFT refusal judged on the remote
 * plan is lifted when the local prefill's own predicted TTFT fits the SLO (a TBT refusal stands:
 * it decodes there either way).
 */
export function admitLocalPrefill(
  verdict: AdmissionVerdict,
  local: LocalPrefillVerdict | undefined,
  ttftSloS: number | undefined,
): AdmissionVerdict {
  if (verdict.admit || verdict.reason !== "ttft_slo" || !local?.local) return verdict;
  const fits = local.localTtftS !== undefined &&
    (ttftSloS === undefined || local.localTtftS <= ttftSloS);
  return fits ? { admit: true } : verdict;
}
