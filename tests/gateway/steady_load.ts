/**
 * Steady client load for the cluster tests: `workers` loops each sending one completion after
 * another (distinct token prompts) until stopped, recording every answer.
 */
import { completion } from "../support/harness.ts";

export interface LoadResult {
  status: number;
  instance: string | null;
  /** performance.now() at send and at the end of the body. */
  startedAt: number;
  endedAt: number;
  error?: string;
}

export interface SteadyLoad {
  readonly results: LoadResult[];
  /** Stops sending and waits for the requests in flight. */
  stop(): Promise<LoadResult[]>;
}

export function steadyLoad(
  url: string,
  options: { model: string; workers?: number; promptTokens?: number; maxTokens?: number },
): SteadyLoad {
  const results: LoadResult[] = [];
  let running = true;
  let sequence = 0;
  const worker = async () => {
    while (running) {
      const n = sequence++;
      const prompt = Array.from({ length: options.promptTokens ?? 64 }, (_, i) => n * 1000 + i);
      const startedAt = performance.now();
      try {
        const response = await completion(url, {
          model: options.model,
          prompt,
          max_tokens: options.maxTokens ?? 2,
        });
        const text = await response.text();
        results.push({
          status: response.status,
          instance: response.headers.get("x-tidegate-instance"),
          startedAt,
          endedAt: performance.now(),
          error: response.ok ? undefined : text.slice(0, 300),
        });
      } catch (error) {
        results.push({
          status: 0,
          instance: null,
          startedAt,
          endedAt: performance.now(),
          error: String(error),
        });
      }
    }
  };
  const loops = Array.from({ length: options.workers ?? 4 }, worker);
  return {
    results,
    async stop() {
      running = false;
      await Promise.all(loops);
      return results;
    },
  };
}
