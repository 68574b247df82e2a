import type { BlockCache } from "./block_cache.ts";
import type { DecodeJob, SimDecodeEngine } from "./decode_engine.ts";
import type { PrefillJob, SimPrefillEngine } from "./prefill_engine.ts";

/**
 * A neutral instance: prefill and decode on the same engine, as an aggregated vLLM or SGLang
 * deployment runs them. One iteration at a time:
 * - chunked: every iteration decodes one token for each running request and computes a prefill
 *   chunk (the prefill engine's budget) in the same forward pass; it lasts the decode step plus
 *   the chunk, so a long prompt slows every running request's tokens chunk by chunk;
 * - unchunked: a waiting prompt is prefilled whole first, the running requests wait (the classic
 *   prefill-first scheduler), then decode steps resume.
 */
export class SimNeutralEngine {
  readonly prefill: SimPrefillEngine;
  readonly decode: SimDecodeEngine;
  readonly chunked: boolean;
  #busy = false;
  #ranPrefill = false;
  #ranDecode = false;

  constructor(prefill: SimPrefillEngine, decode: SimDecodeEngine, chunked: boolean) {
    this.prefill = prefill;
    this.decode = decode;
    this.chunked = chunked;
  }

  get name(): string {
    return this.prefill.name;
  }

  get cache(): BlockCache {
    return this.prefill.cache;
  }

  get busy(): boolean {
    return this.#busy;
  }

  /** Starts an iteration when idle and work exists; returns its duration in seconds. */
  start(nowS: number): number | undefined {
    if (this.#busy) return undefined;
    let costS = 0;
    const prefillS = this.prefill.startIteration(nowS);
    this.#ranPrefill = prefillS !== undefined;
    if (prefillS !== undefined) costS += prefillS;
    this.#ranDecode = false;
    if (this.chunked || !this.#ranPrefill) {
      const decodeS = this.decode.startStep();
      this.#ranDecode = decodeS !== undefined;
      if (decodeS !== undefined) costS += decodeS;
    }
    if (!this.#ranPrefill && !this.#ranDecode) return undefined;
    this.#busy = true;
    return costS;
  }

  /** Ends the iteration: the prompts prefilled to the end and the requests that finished decoding. */
  finish(nowS: number): { prefilled: PrefillJob[]; decoded: DecodeJob[] } {
    this.#busy = false;
    return {
      prefilled: this.#ranPrefill ? this.prefill.finishIteration() : [],
      decoded: this.#ranDecode ? this.decode.finishStep(nowS) : [],
    };
  }
}
