/**
 * A request body sent to the engine as it arrives (audio uploads), not read whole first. What the
 * router reads before the first attempt (up to the field that names the model) is kept, and then
 * up to `replayBytes` in all, so that an attempt failing before its answer can be retried from the
 * first byte; past that the kept bytes are dropped and no further attempt can be made. The body is held to the router's limits while it streams: `maxBytes` and a
 * deadline for the whole of it (`limits.maxBodyBytes`, `limits.clientBodyTimeoutMs`).
 */
import { bodyTimeout, bodyTooLarge, HttpError } from "../openai/errors.ts";
import type { StreamedBody } from "../proxy/forward.ts";

export interface UploadLimits {
  maxBytes: number;
  /** Bytes kept for a retry. */
  replayBytes: number;
  /** The whole body must be in this long after the upload began. */
  timeoutMs: number;
  now: () => number;
}

export class UploadBody implements StreamedBody {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #limits: UploadLimits;
  readonly #deadline: number;
  #kept: Uint8Array[] = [];
  #keptBytes = 0;
  /** Bytes read from the client so far (kept or not). */
  #read = 0;
  #overflowed = false;
  #ended = false;
  /** Until the first attempt opens it, everything read is kept (the model may come late). */
  #opened = false;
  /** Why the client's body was refused while it streamed (too large, too slow). */
  clientError?: HttpError;

  constructor(reader: ReadableStreamDefaultReader<Uint8Array>, limits: UploadLimits) {
    this.#reader = reader;
    this.#limits = limits;
    this.#deadline = limits.now() + limits.timeoutMs;
  }

  /** Reads one more chunk from the client, kept for a retry; undefined at the end. */
  async read(): Promise<Uint8Array | undefined> {
    if (this.#ended) return undefined;
    const left = this.#deadline - this.#limits.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(bodyTimeout(this.#limits.timeoutMs)), Math.max(0, left));
    });
    let next: ReadableStreamReadResult<Uint8Array>;
    try {
      next = await Promise.race([this.#reader.read(), late]);
    } catch (error) {
      this.#fail(error instanceof HttpError ? error : undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
    if (next.done) {
      this.#ended = true;
      return undefined;
    }
    const chunk = next.value;
    this.#read += chunk.byteLength;
    if (this.#read > this.#limits.maxBytes) {
      const error = bodyTooLarge(this.#limits.maxBytes);
      this.#fail(error);
      throw error;
    }
    this.#keep(chunk);
    return chunk;
  }

  /** Whether an attempt can still send the body from its first byte. */
  get replayable(): boolean {
    return !this.#overflowed && !this.clientError;
  }

  get bytesRead(): number {
    return this.#read;
  }

  /** The body from its first byte: what was kept, then the rest as the client sends it. */
  open(): ReadableStream<Uint8Array> {
    this.#opened = true;
    let index = 0;
    let sent = 0;
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (sent < this.#read) {
          // Replaying: only possible while every byte read is still kept.
          const chunk = this.#overflowed ? undefined : this.#kept[index++];
          if (!chunk) throw new Error("the upload's first bytes are no longer kept for a retry");
          sent += chunk.byteLength;
          controller.enqueue(chunk);
          return;
        }
        const chunk = await this.read();
        if (!chunk) {
          controller.close();
          return;
        }
        if (!this.#overflowed) index++;
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
  }

  /** The request is over: the rest of the client's body is not read. */
  discard(): void {
    this.#kept = [];
    if (!this.#ended) this.#reader.cancel().catch(() => {});
  }

  #keep(chunk: Uint8Array): void {
    if (this.#overflowed) return;
    this.#keptBytes += chunk.byteLength;
    if (this.#opened && this.#keptBytes > this.#limits.replayBytes) {
      this.#overflowed = true;
      this.#kept = [];
      return;
    }
    this.#kept.push(chunk);
  }

  #fail(error: HttpError | undefined): void {
    this.clientError ??= error ?? new HttpError(400, "The client's request body broke off", {
      code: "client_body_error",
    });
    this.#reader.cancel().catch(() => {});
  }
}
