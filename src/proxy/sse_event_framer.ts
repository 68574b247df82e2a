/**
 * Passes an SSE stream on in whole events: bytes after the last blank line (an event not yet
 * ended) are held until the rest arrives. When the engine fails mid-event, the router then appends
 * its error event after a complete one and drops the half-sent line, instead of gluing the two
 * into one malformed event. Engines write whole events per chunk, so nothing waits in practice.
 */
const LF = 0x0a;
const CR = 0x0d;
/** An "event" longer than this is no SSE the router knows: it is passed on unframed. */
const MAX_HELD_BYTES = 1024 * 1024;

export class SseEventFramer {
  #held: Uint8Array = new Uint8Array(0);

  /** Bytes of an unfinished event held back. */
  get heldBytes(): number {
    return this.#held.byteLength;
  }

  /** What may go to the client now: everything up to the last event boundary seen. */
  push(chunk: Uint8Array): Uint8Array | undefined {
    const bytes = this.#held.byteLength === 0 ? chunk : concat(this.#held, chunk);
    const found = lastBoundary(bytes);
    const end = bytes.byteLength - found > MAX_HELD_BYTES ? bytes.byteLength : found;
    this.#held = end === bytes.byteLength ? new Uint8Array(0) : bytes.slice(end);
    return end === 0 ? undefined : bytes.subarray(0, end);
  }

  /** The stream ended normally: whatever is held goes out as the engine sent it. */
  flush(): Uint8Array | undefined {
    const held = this.#held;
    this.#held = new Uint8Array(0);
    return held.byteLength > 0 ? held : undefined;
  }

  /** The stream failed: the unfinished event is dropped. */
  discard(): void {
    this.#held = new Uint8Array(0);
  }
}

/** The index just past the last blank line ("\n\n" or "\n\r\n"), 0 when there is none. */
function lastBoundary(bytes: Uint8Array): number {
  for (let i = bytes.byteLength - 1; i >= 1; i--) {
    if (bytes[i] !== LF) continue;
    if (bytes[i - 1] === LF) return i + 1;
    if (bytes[i - 1] === CR && i >= 2 && bytes[i - 2] === LF) return i + 1;
  }
  return 0;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}
