/**
 * Requests waiting and running per data-parallel rank of a vLLM engine, read from its own
 * `/metrics` (each engine core labels its gauges `engine="<rank>"`: PrometheusStatLogger,
 * vllm/v1/metrics/loggers.py, vllm-project/vllm a6f0308c), for pinning Mooncake prefills to the
 * least loaded rank (src/proxy/mooncake_bootstrap.ts).
 */
import { parsePrometheusText } from "./prometheus_text.ts";

const LOAD_GAUGES = new Set(["vllm:num_requests_waiting", "vllm:num_requests_running"]);

/** Waiting plus running requests per rank; undefined when no series carries a rank label. */
export function rankLoadsOf(text: string): Map<number, number> | undefined {
  const { samples } = parsePrometheusText(text, { keep: (name) => LOAD_GAUGES.has(name) });
  const loads = new Map<number, number>();
  for (const { labels, value } of samples) {
    if (!/^\d+$/.test(labels.engine ?? "") || Number.isNaN(value)) continue;
    const rank = Number(labels.engine);
    loads.set(rank, (loads.get(rank) ?? 0) + value);
  }
  return loads.size > 0 ? loads : undefined;
}

/** Reads one engine's per-rank load within `timeoutMs`; undefined when it cannot say. */
export function rankLoadsReader(
  fetch: typeof globalThis.fetch,
  timeoutMs: number,
): (engineUrl: string) => Promise<Map<number, number> | undefined> {
  return async (engineUrl) => {
    try {
      const response = await fetch(`${engineUrl.replace(/\/+$/, "")}/metrics`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) {
        await response.body?.cancel();
        return undefined;
      }
      return rankLoadsOf(await response.text());
    } catch {
      return undefined;
    }
  };
}
