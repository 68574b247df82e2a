import { type BodyLimits, ReadWatchdog } from "./read_watchdog.ts";
import { chunkReader } from "./chunk_reader.ts";
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

/**
 * Rewrites the bytes on their way to the client, in order (e.g. src/proxy/usage_chunk_filter.ts);
 * undefined or empty: nothing to pass on yet.
 */
export interface ChunkRewrite {
  push(chunk: Uint8Array): Uint8Array | undefined;
  /** The body ended: what is still held. */
  end(): Uint8Array | undefined;
}

/**
 * Streams `body` through without buffering while reporting first byte and end, rewritten by
 * `rewrite` in the same pull (a second stream piped behind it would cost a hop per chunk). Leases are
 * released from here, not from `request.signal` (Deno also aborts that after normal responses).
 * A failing engine ends an SSE stream with the observer's error event; any other body is errored,
 * so the client sees a broken answer rather than a clean, truncated one.
 */
export function observeBody(
  body: ReadableStream<Uint8Array> | null,
  observer: BodyObserver,
  limits?: BodyLimits,
  rewrite?: ChunkRewrite,
): ReadableStream<Uint8Array> {
  let ended = false;
  let first = true;
  const reader = body ? chunkReader(body) : undefined;
  const watchdog = reader && limits ? new ReadWatchdog(reader, limits) : undefined;
  const end = (outcome: BodyOutcome, error?: unknown) => {
    if (ended) return;
    ended = true;
    watchdog?.dispose();
    observer.onEnd(outcome, error);
  };
  if (!reader) {
    return new ReadableStream({
      start(controller) {
        end("completed");
        controller.close();
      },
    });
  }
  const framer = observer.errorEvent ? new SseEventFramer() : undefined;
  const pass = (bytes: Uint8Array | undefined) => (rewrite && bytes ? rewrite.push(bytes) : bytes);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const enqueue = (bytes: Uint8Array | undefined) => {
        if (bytes && bytes.byteLength > 0) controller.enqueue(bytes);
      };
      // Reads until there is something to pass on: a pull that enqueues nothing is not repeated.
      for (;;) {
        let result: ReadableStreamReadResult<Uint8Array>;
        try {
          result = watchdog ? await watchdog.read() : await reader.read();
        } catch (error) {
          if (ended) return;
          framer?.discard();
          const event = observer.errorEvent?.(error);
          end("upstream_failed", error);
          if (event) {
            enqueue(pass(event));
            enqueue(rewrite?.end());
            controller.close();
          } else controller.error(error);
          return;
        }
        if (result.done) {
          enqueue(pass(framer?.flush()));
          enqueue(rewrite?.end());
          end("completed");
          controller.close();
          return;
        }
        if (first) {
          first = false;
          observer.onFirstByte?.();
        }
        observer.onChunk?.(result.value);
        const out = pass(framer ? framer.push(result.value) : result.value);
        if (out && out.byteLength > 0) return controller.enqueue(out);
      }
    },
    cancel(reason) {
      end("client_aborted", reason);
      return reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
