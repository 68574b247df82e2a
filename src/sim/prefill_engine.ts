import type { PrefillModelCoefficients } from "../scheduling/types.ts";
import type { BlockCache } from "./block_cache.ts";

/** A request as the simulated prefill engine sees it. */
export interface PrefillJob {
  requestIndex: number;
  promptTokens: number;
  hashIds: readonly number[];
  /** Reuse the pool prefix beyond the local one (planned transfer, or a pool engines always read). */
  usePool: boolean;
  // Filled when the engine starts the job:
  startS: number;
  cachedTokens: number;
  localTokens: number;
  transferTokens: number;
  newTokens: number;
  doneTokens: number;
  transferS: number;
  /** Compute seconds spent on this job (excluding the transfer). */
  computeS: number;
  insertedBlocks: number;
}

export function newPrefillJob(
  requestIndex: number,
  promptTokens: number,
  hashIds: readonly number[],
  usePool: boolean,
): PrefillJob {
  return {
    requestIndex,
    promptTokens,
    hashIds,
    usePool,
    startS: -1,
    cachedTokens: 0,
    localTokens: 0,
    transferTokens: 0,
    newTokens: 0,
    doneTokens: 0,
    transferS: 0,
    computeS: 0,
    insertedBlocks: 0,
  };
}

export interface PrefillEngineOptions {
  /** The engine's true prefill time (the router only has its own model of it). */
  model: PrefillModelCoefficients;
  /** Multiplier on compute time (1: runs exactly at `model`). */
  slowdown: number;
  /** New tokens computed per iteration (chunked prefill budget). */
  chunkTokens: number;
  /** Without chunking: an iteration computes one whole prompt, however long (default false). */
  unchunked?: boolean;
  /**
   * Seconds each iteration costs besides its tokens, however many requests it batches (default 0:
   * a batch costs the sum of its prompts), scaled by `slowdown` like the compute. A CPU engine's
   * step overhead makes a batch of short prefills much cheaper than the same prompts one by one.
   */
  stepS?: number;
  blockTokens: number;
  kvBytesPerToken: number;
  transferBytesPerS: number;
}

/**
 * A simulated prefill instance: a FIFO queue, chunked prefill (each iteration computes up to
 * `chunkTokens` new tokens, across requests), and a bounded LRU KV cache. The cost of a request
 * split into chunks adds up to `model(new, cached)` exactly (the attention term telescopes).
 * Computed blocks are written to the cache at the end of each iteration, so later requests can
 * reuse them while a long prompt is still being prefilled.
 */
export class SimPrefillEngine {
  readonly name: string;
  readonly cache: BlockCache;
  readonly #options: PrefillEngineOptions;
  readonly #poolPrefix: (blocks: readonly number[]) => number;
  #queue: PrefillJob[] = [];
  #head = 0;
  #iteration: PrefillJob[] = [];
  #busy = false;
  /** Seconds spent computing or transferring so far. */
  busyS = 0;

  /** `poolPrefix` counts consecutive blocks present anywhere in the pool. */
  constructor(
    name: string,
    cache: BlockCache,
    options: PrefillEngineOptions,
    poolPrefix: (blocks: readonly number[]) => number,
  ) {
    this.name = name;
    this.cache = cache;
    this.#options = options;
    this.#poolPrefix = poolPrefix;
  }

  get busy(): boolean {
    return this.#busy;
  }

  get queued(): number {
    return this.#queue.length - this.#head;
  }

  enqueue(job: PrefillJob): void {
    this.#queue.push(job);
  }

  /** Starts an iteration when idle and work is queued; returns its duration in seconds. */
  startIteration(nowS: number): number | undefined {
    if (this.#busy || this.queued === 0) return undefined;
    const o = this.#options;
    const m = o.model;
    let budget = o.unchunked ? Number.POSITIVE_INFINITY : o.chunkTokens;
    // Every job in the iteration waits through its step: the router's measured prefill includes it.
    const stepS = (o.stepS ?? 0) * o.slowdown;
    let costS = stepS;
    this.#iteration = [];
    for (
      let i = this.#head;
      i < this.#queue.length && budget > 0 && !(o.unchunked && this.#iteration.length > 0);
      i++
    ) {
      const job = this.#queue[i];
      if (job.startS < 0) costS += this.#start(job, nowS);
      const n = Math.min(budget, job.newTokens - job.doneTokens);
      const k = n / 1000;
      const context = (job.cachedTokens + job.doneTokens) / 1000;
      const sliceS = (m.linear * k + m.quadratic * k * (k + 2 * context)) * o.slowdown;
      job.computeS += sliceS + stepS;
      costS += sliceS;
      job.doneTokens += n;
      budget -= n;
      this.#iteration.push(job);
    }
    this.#busy = true;
    this.busyS += costS;
    return costS;
  }

  /** Ends the running iteration: writes computed blocks, returns the jobs whose prefill is done. */
  finishIteration(): PrefillJob[] {
    const done: PrefillJob[] = [];
    for (const job of this.#iteration) {
      const complete = job.doneTokens >= job.newTokens;
      const blocks = complete
        ? job.hashIds.length
        : Math.floor((job.cachedTokens + job.doneTokens) / this.#options.blockTokens);
      for (let b = job.insertedBlocks; b < blocks; b++) this.cache.insert(job.hashIds[b]);
      job.insertedBlocks = Math.max(job.insertedBlocks, blocks);
      if (complete) done.push(job);
    }
    this.#iteration = [];
    this.#busy = false;
    while (
      this.#head < this.#queue.length &&
      this.#queue[this.#head].doneTokens >= this.#queue[this.#head].newTokens &&
      this.#queue[this.#head].startS >= 0
    ) {
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    return done;
  }

  /** Decides what the job reuses now (the cache may have changed since dispatch). */
  #start(job: PrefillJob, nowS: number): number {
    const o = this.#options;
    const m = o.model;
    const reusable = Math.max(0, job.promptTokens - 1);
    const localBlocks = this.cache.prefixLength(job.hashIds);
    const reuseBlocks = job.usePool
      ? Math.max(localBlocks, this.#poolPrefix(job.hashIds))
      : localBlocks;
    job.startS = nowS;
    job.cachedTokens = Math.min(reuseBlocks * o.blockTokens, reusable);
    job.localTokens = Math.min(localBlocks * o.blockTokens, job.cachedTokens);
    job.transferTokens = job.cachedTokens - job.localTokens;
    job.newTokens = job.promptTokens - job.cachedTokens;
    // Reused blocks become the most recently used; transferred ones are now replicated here.
    for (let b = 0; b < reuseBlocks; b++) this.cache.insert(job.hashIds[b]);
    job.insertedBlocks = reuseBlocks;
    job.transferS = job.transferTokens * o.kvBytesPerToken / o.transferBytesPerS;
    const fixedS = ((m.cachedLinear ?? 0) * job.cachedTokens / 1000 + (m.constant ?? 0)) *
      o.slowdown;
    job.computeS += fixedS;
    return job.transferS + fixedS;
  }
}
