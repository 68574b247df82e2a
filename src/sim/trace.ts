/** One request of a Mooncake FAST'25 trace (docs/compat.md §8). */
export interface TraceRequest {
  /** Arrival in milliseconds from the start of the trace. */
  timestampMs: number;
  inputLength: number;
  outputLength: number;
  /** Prefix-chained ids of the prompt's 512-token blocks: equal ids, equal prefix. */
  hashIds: number[];
}

/**
 * Parses Mooncake JSONL (`{timestamp, input_length, output_length, hash_ids}` per line), keeping
 * the first `limit` requests. Stable-sorted by timestamp. Bad lines throw with their number.
 */
export function parseMooncakeTrace(text: string, options: { limit?: number } = {}): TraceRequest[] {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const requests: TraceRequest[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length && requests.length < limit; i++) {
    const line = lines[i].trim();
    if (line === "") continue;
    let row: Record<string, unknown>;
    try {
      row = JSON.parse(line);
    } catch {
      throw new Error(`Trace line ${i + 1} is not JSON: ${line.slice(0, 80)}`);
    }
    const timestamp = row.timestamp, input = row.input_length, output = row.output_length;
    const hashIds = row.hash_ids;
    if (
      typeof timestamp !== "number" || !(timestamp >= 0) ||
      typeof input !== "number" || !Number.isInteger(input) || input < 1 ||
      typeof output !== "number" || !Number.isInteger(output) || output < 0 ||
      !Array.isArray(hashIds) || !hashIds.every((id) => Number.isInteger(id))
    ) {
      throw new Error(
        `Trace line ${i + 1} is not a Mooncake request: expected {timestamp (ms, >= 0), ` +
          `input_length (>= 1), output_length (>= 0), hash_ids (integers)}.`,
      );
    }
    requests.push({ timestampMs: timestamp, inputLength: input, outputLength: output, hashIds });
  }
  return requests
    .map((request, index) => ({ request, index }))
    .sort((a, b) => a.request.timestampMs - b.request.timestampMs || a.index - b.index)
    .map(({ request }) => request);
}

/**
 * The trace without its first `n` requests, the rest shifted to arrive from 0 as the whole trace
 * does: a part a tuning run on the first `n` did not see.
 */
export function withoutFirst(trace: readonly TraceRequest[], n: number): TraceRequest[] {
  const rest = trace.slice(n);
  const start = rest[0]?.timestampMs ?? 0;
  return rest.map((request) => ({ ...request, timestampMs: request.timestampMs - start }));
}
