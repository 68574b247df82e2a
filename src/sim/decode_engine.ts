import { type DecodeModel, decodeStepS } from "../scheduling/decode_model.ts";

export interface DecodeJob {
  requestIndex: number;
  remainingTokens: number;
  outputTokens: number;
  joinS: number;
  /** KV tokens the request holds when it joins (its prompt); grows by one per step. */
  contextTokens?: number;
  /** When its last token came out (the first token, at the end of its prefill, to start with). */
  lastTokenS?: number;
  /** KV tokens it holds on the engine (kept by the engine). */
  heldKvTokens?: number;
}

export interface DecodeEngineOptions {
  /** Called with every inter-token gap (seconds) at the end of each step. */
  onGap?: (gapS: number) => void;
  /**
   * Most requests in one batch (`max_num_seqs`); later ones wait, first in first out, for a
   * place (default: no limit).
   */
  maxBatch?: number;
}

/**
 * A simulated decode instance: continuous batching, one token per running request per step,
 * step time from the decode model (with its KV term, over the running requests' KV tokens).
 * Requests join at the next step boundary, or wait there while the batch is full.
 */
export class SimDecodeEngine {
  readonly name: string;
  readonly #model: DecodeModel;
  readonly #onGap?: (gapS: number) => void;
  readonly #maxBatch: number;
  #running: DecodeJob[] = [];
  #joining: DecodeJob[] = [];
  #joiningHead = 0;
  #stepping = false;
  #stepS = 0;
  #runningKv = 0;
  #joiningKv = 0;

  constructor(name: string, model: DecodeModel, options: DecodeEngineOptions = {}) {
    this.name = name;
    this.#model = model;
    this.#onGap = options.onGap;
    this.#maxBatch = options.maxBatch ?? Number.POSITIVE_INFINITY;
  }

  /** Requests decoding, about to join or waiting for a place: what the router counts as running. */
  get runningRequests(): number {
    return this.#running.length + this.#joining.length - this.#joiningHead;
  }

  /** Requests waiting (joining) for the next step or a place in the batch. */
  get waitingRequests(): number {
    return this.#joining.length - this.#joiningHead;
  }

  /** KV tokens held by the running, joining and waiting requests. */
  get kvTokens(): number {
    return this.#runningKv + this.#joiningKv;
  }

  get stepping(): boolean {
    return this.#stepping;
  }

  add(job: DecodeJob): void {
    this.#joining.push(job);
    job.heldKvTokens = job.contextTokens ?? 0;
    this.#joiningKv += job.heldKvTokens;
  }

  /** Starts a step when idle and work exists; returns its duration in seconds. */
  startStep(): number | undefined {
    if (this.#stepping) return undefined;
    while (this.#joiningHead < this.#joining.length && this.#running.length < this.#maxBatch) {
      const job = this.#joining[this.#joiningHead++];
      this.#joiningKv -= job.heldKvTokens ?? 0;
      this.#runningKv += job.heldKvTokens ?? 0;
      this.#running.push(job);
    }
    if (this.#joiningHead > 0 && this.#joiningHead * 2 >= this.#joining.length) {
      this.#joining = this.#joining.slice(this.#joiningHead);
      this.#joiningHead = 0;
    }
    if (this.#running.length === 0) return undefined;
    this.#stepping = true;
    this.#stepS = decodeStepS(this.#model, this.#running.length, this.#runningKv);
    return this.#stepS;
  }

  /**
   * Ends the step at `nowS` (for the gaps; without it no gap is recorded); returns the requests
   * that produced their last token.
   */
  finishStep(nowS?: number): DecodeJob[] {
    this.#stepping = false;
    const finished: DecodeJob[] = [];
    const still: DecodeJob[] = [];
    const onGap = nowS === undefined ? undefined : this.#onGap;
    for (const job of this.#running) {
      if (onGap && job.lastTokenS !== undefined) onGap(nowS! - job.lastTokenS);
      if (nowS !== undefined) job.lastTokenS = nowS;
      job.remainingTokens--;
      if (job.remainingTokens <= 0) {
        finished.push(job);
        this.#runningKv -= job.heldKvTokens ?? 0;
      } else {
        // It wrote one more token of KV.
        job.heldKvTokens = (job.heldKvTokens ?? 0) + 1;
        this.#runningKv++;
        still.push(job);
      }
    }
    this.#running = still;
    return finished;
  }
}
