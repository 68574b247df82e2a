import { type DecodeModel, decodeStepS } from "../scheduling/decode_model.ts";

export interface DecodeJob {
  requestIndex: number;
  remainingTokens: number;
  outputTokens: number;
  joinS: number;
}

/**
 * A simulated decode instance: continuous batching, one token per running request per step,
 * step time from the decode model. Requests join at the next step boundary.
 */
export class SimDecodeEngine {
  readonly name: string;
  readonly #model: DecodeModel;
  #running: DecodeJob[] = [];
  #joining: DecodeJob[] = [];
  #stepping = false;
  #stepS = 0;

  constructor(name: string, model: DecodeModel) {
    this.name = name;
    this.#model = model;
  }

  /** Requests decoding or about to join: what the router counts as running. */
  get runningRequests(): number {
    return this.#running.length + this.#joining.length;
  }

  get stepping(): boolean {
    return this.#stepping;
  }

  add(job: DecodeJob): void {
    this.#joining.push(job);
  }

  /** Starts a step when idle and work exists; returns its duration in seconds. */
  startStep(): number | undefined {
    if (this.#stepping) return undefined;
    if (this.#joining.length > 0) {
      this.#running.push(...this.#joining);
      this.#joining = [];
    }
    if (this.#running.length === 0) return undefined;
    this.#stepping = true;
    this.#stepS = decodeStepS(this.#model, this.#running.length);
    return this.#stepS;
  }

  /** Ends the step; returns the requests that produced their last token. */
  finishStep(): DecodeJob[] {
    this.#stepping = false;
    const finished: DecodeJob[] = [];
    const still: DecodeJob[] = [];
    for (const job of this.#running) {
      job.remainingTokens--;
      if (job.remainingTokens <= 0) finished.push(job);
      else still.push(job);
    }
    this.#running = still;
    return finished;
  }
}
