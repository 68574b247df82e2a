/**
 * Reads a body's chunks into one buffer of its own, reused, where the stream lets a reader bring
 * its buffer (a fetch body does). Deno's default reader hands out each read in a fresh 64 KiB
 * buffer: for an engine that writes each token on its own, 64 KiB of garbage per token
 * (docs/benchmarks.md, "Paced streams"). Each chunk handed out is a copy of the bytes read, so
 * the buffer can be read into again at once.
 */
export interface ChunkReader {
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  cancel(reason?: unknown): Promise<void>;
}

const BUFFER_BYTES = 64 * 1024;

export function chunkReader(body: ReadableStream<Uint8Array>): ChunkReader {
  let reader: ReadableStreamBYOBReader;
  try {
    reader = body.getReader({ mode: "byob" });
  } catch {
    return body.getReader(); // not a byte stream: its own chunks, as they come
  }
  let buffer = new ArrayBuffer(BUFFER_BYTES);
  return {
    async read() {
      const { value, done } = await reader.read(new Uint8Array(buffer));
      if (value) buffer = value.buffer as ArrayBuffer; // the same memory, handed back
      if (done || !value) return { done: true, value: undefined };
      return { done: false, value: value.slice() };
    },
    cancel: (reason) => reader.cancel(reason),
  };
}
