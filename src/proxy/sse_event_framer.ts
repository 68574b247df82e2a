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

const EMPTY = new Uint8Array(0);

export class SseEventFramer {
  // The unfinished event: `#length` bytes of a buffer grown by doubling, so that an event arriving
  // in many small chunks costs linear time, not a copy and a rescan of all held bytes per chunk.
  #held: Uint8Array = EMPTY;
  #length = 0;

  /** Bytes of an unfinished event held back. */
  get heldBytes(): number {
    return this.#length;
  }

  /** What may go to the client now: everything up to the last event boundary seen. */
  push(chunk: Uint8Array): Uint8Array | undefined {
    const held = this.#length;
    // Held bytes end no event, so a new boundary ends in this chunk: only it is scanned.
    const found = lastBoundary(chunk, this.#held.subarray(0, held));
    if (found === 0 && held + chunk.byteLength <= MAX_HELD_BYTES) {
      this.#append(chunk);
      return undefined;
    }
    // Past the cap an "event" is no SSE the router knows: everything goes out unframed.
    const end = found === 0 || held + chunk.byteLength - (held + found) > MAX_HELD_BYTES
      ? chunk.byteLength
      : found;
    const out = held === 0 ? chunk.subarray(0, end) : this.#takeWith(chunk.subarray(0, end));
    if (end < chunk.byteLength) this.#append(chunk.subarray(end));
    return out;
  }

  /** The stream ended normally: whatever is held goes out as the engine sent it. */
  flush(): Uint8Array | undefined {
    return this.#length > 0 ? this.#takeWith(EMPTY) : undefined;
  }

  /** The stream failed: the unfinished event is dropped. */
  discard(): void {
    this.#length = 0;
  }

  /** The held bytes followed by `tail`, in a new array; nothing is held after. */
  #takeWith(tail: Uint8Array): Uint8Array {
    const out = new Uint8Array(this.#length + tail.byteLength);
    out.set(this.#held.subarray(0, this.#length), 0);
    out.set(tail, this.#length);
    this.#length = 0;
    return out;
  }

  #append(bytes: Uint8Array): void {
    const need = this.#length + bytes.byteLength;
    if (need > this.#held.byteLength) {
      const grown = new Uint8Array(Math.max(need, 2 * this.#held.byteLength, 256));
      grown.set(this.#held.subarray(0, this.#length), 0);
      this.#held = grown;
    }
    this.#held.set(bytes, this.#length);
    this.#length = need;
  }
}

/**
 * The index in `chunk` just past its last blank line ("\n\n" or "\n\r\n"), 0 when there is
 * none; the line ending may begin in `before`, the bytes held ahead of the chunk.
 */
function lastBoundary(chunk: Uint8Array, before: Uint8Array): number {
  const at = (i: number) => i >= 0 ? chunk[i] : before[before.byteLength + i];
  const first = -Math.min(2, before.byteLength);
  for (let i = chunk.byteLength - 1; i >= 0; i--) {
    if (chunk[i] !== LF) continue;
    if (i - 1 >= first && at(i - 1) === LF) return i + 1;
    if (i - 2 >= first && at(i - 1) === CR && at(i - 2) === LF) return i + 1;
  }
  return 0;
}
