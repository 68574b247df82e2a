import { SseEventFramer } from "./sse_event_framer.ts";

/** How a proxied body ended, exactly once per response. */
export type BodyOutcome = "completed" | "client_aborted" | "upstream_failed";

export interface BodyObserver {
  /** The first bytes arrived from the engine (for a stream: the first token). */
  onFirstByte?(): void;
  /** Every chunk, for stream-level measurements (inter-token latency, usage). */
  onChunk?(chunk: Uint8Array): void;
  /** Called exactly once: end of stream, client gone, or engine failure mid-stream. */
  onEnd(outcome: BodyOutcome, error?: unknown): void;
  /**
   * For SSE streams: an event to append when the engine fails after bytes were sent. The stream
   * then goes to the client in whole events (sse_event_framer.ts), so the error event never
   * lands in the middle of one.
   */
  errorEvent?(error: unknown): Uint8Array | undefined;
}

/** How long an engine may stay silent, and how long a whole answer may take. */
export interface BodyLimits {
  idleTimeoutMs: number;
  maxDurationMs: number;
  /** Ends the answer at once, erroring with the signal's reason (the router shutting down). */
  abort?: AbortSignal;
}

/** The engine went silent past `idleTimeoutMs`, or the answer outlasted `maxDurationMs`. */
export class UpstreamStalledError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamStalledError";
  }
}

/**
 * Streams `body` through without buffering while reporting first byte and end. Leases are
 * released from here, not from `request.signal` (Deno also aborts that after normal responses).
 * A failing engine ends an SSE stream with the observer's error event; any other body is errored,
 * so the client sees a broken answer rather than a clean, truncated one.
 */
export function observeBody(
  body: ReadableStream<Uint8Array> | null,
  observer: BodyObserver,
  limits?: BodyLimits,
): ReadableStream<Uint8Array> {
  let ended = false;
  let first = true;
  const end = (outcome: BodyOutcome, error?: unknown) => {
    if (ended) return;
    ended = true;
    observer.onEnd(outcome, error);
  };
  if (!body) {
    return new ReadableStream({
      start(controller) {
        end("completed");
        controller.close();
      },
    });
  }
  const reader = body.getReader();
  const endBy = limits ? performance.now() + limits.maxDurationMs : Infinity;
  const framer = observer.errorEvent ? new SseEventFramer() : undefined;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      // Reads until there is something to pass on: a pull that enqueues nothing is not repeated.
      for (;;) {
        let result: ReadableStreamReadResult<Uint8Array>;
        try {
          result = limits ? await readWithin(reader, limits, endBy) : await reader.read();
        } catch (error) {
          if (ended) return;
          framer?.discard();
          const event = observer.errorEvent?.(error);
          end("upstream_failed", error);
          if (event) {
            controller.enqueue(event);
            controller.close();
          } else controller.error(error);
          return;
        }
        if (result.done) {
          const rest = framer?.flush();
          if (rest) controller.enqueue(rest);
          end("completed");
          controller.close();
          return;
        }
        if (first) {
          first = false;
          observer.onFirstByte?.();
        }
        observer.onChunk?.(result.value);
        const out = framer ? framer.push(result.value) : result.value;
        if (out) return controller.enqueue(out);
      }
    },
    cancel(reason) {
      end("client_aborted", reason);
      return reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}

/** One read, bounded by the idle timeout and what is left of the whole answer's time. */
async function readWithin(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  limits: BodyLimits,
  endBy: number,
): Promise<ReadableStreamReadResult<Uint8Array>> {
  const left = endBy - performance.now();
  const waitMs = Math.max(0, Math.min(limits.idleTimeoutMs, left));
  const reason = left <= limits.idleTimeoutMs
    ? `the answer took longer than ${limits.maxDurationMs} ms`
    : `the engine sent nothing for ${limits.idleTimeoutMs} ms`;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort = () => {};
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UpstreamStalledError(reason)), waitMs);
    onAbort = () => reject(limits.abort?.reason);
    if (limits.abort?.aborted) onAbort();
    limits.abort?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([reader.read(), stopped]);
  } catch (error) {
    reader.cancel(error).catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
    limits.abort?.removeEventListener("abort", onAbort);
  }
}
