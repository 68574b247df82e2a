/**
 * The router's tokenizer worker pools, one per tokenizer (directory and options), shared by the
 * models that use it and kept across reloads like the tokenizers themselves. `size` 0: none.
 */
import { TokenizerWorkerPool } from "./tokenizer_worker_pool.ts";
import type { TokenizerSpec } from "./worker_protocol.ts";

export interface TokenizerPoolsOptions {
  /** Workers per pool (the config's `workers`). */
  size: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
  createWorker?: () => Worker;
}

export class TokenizerPools {
  readonly #options: TokenizerPoolsOptions;
  readonly #pools = new Map<string, TokenizerWorkerPool>();

  constructor(options: TokenizerPoolsOptions) {
    this.#options = options;
  }

  /** The pool for `spec`, or undefined when pools are off. */
  get(spec: TokenizerSpec, timeoutMs: number): TokenizerWorkerPool | undefined {
    if (this.#options.size <= 0) return undefined;
    const key = JSON.stringify([spec.dir, spec.fastPath, spec.cacheMaxTokens, timeoutMs]);
    let pool = this.#pools.get(key);
    if (!pool) {
      pool = new TokenizerWorkerPool({ ...this.#options, spec, timeoutMs });
      // Loading takes seconds: started with the model, so the first long prompts find a worker.
      pool.start();
      this.#pools.set(key, pool);
    }
    return pool;
  }

  /**
   * Resolves once every pool's workers have loaded their tokenizer (or failed to), or after
   * `timeoutMs`: true when all loaded.
   */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    const loading = () => this.all().some((pool) => pool.loadingWorkers > 0);
    while (loading() && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return !loading();
  }

  /** Every pool, for metrics. */
  all(): TokenizerWorkerPool[] {
    return [...this.#pools.values()];
  }

  close(): void {
    for (const pool of this.#pools.values()) pool.close();
    this.#pools.clear();
  }
}
