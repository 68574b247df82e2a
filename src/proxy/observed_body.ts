/** How a proxied body ended, exactly once per response. */
export type BodyOutcome = "completed" | "client_aborted" | "upstream_failed";

export interface BodyObserver {
  /** The first bytes arrived from the engine (for a stream: the first token). */
  onFirstByte?(): void;
  /** Every chunk, for stream-level measurements (inter-token latency, usage). */
  onChunk?(chunk: Uint8Array): void;
  /** Called exactly once: end of stream, client gone, or engine failure mid-stream. */
  onEnd(outcome: BodyOutcome, error?: unknown): void;
  /** For SSE streams: an event to append when the engine fails after bytes were sent. */
  errorEvent?(error: unknown): Uint8Array | undefined;
}

/**
 * Streams `body` through without buffering while reporting first byte and end. Leases are
 * released from here, not from `request.signal` (Deno also aborts that after normal responses).
 */
export function observeBody(
  body: ReadableStream<Uint8Array> | null,
  observer: BodyObserver,
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
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        if (ended) return;
        const event = observer.errorEvent?.(error);
        if (event) controller.enqueue(event);
        end("upstream_failed", error);
        controller.close();
        return;
      }
      if (result.done) {
        end("completed");
        controller.close();
        return;
      }
      if (first) {
        first = false;
        observer.onFirstByte?.();
      }
      observer.onChunk?.(result.value);
      controller.enqueue(result.value);
    },
    cancel(reason) {
      end("client_aborted", reason);
      return reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
