import { type ExtraItem, type ExtraTuple, isTupleKey } from "./extra_tuple.ts";

// By Math.clz32(t) for 24 <= t < 2^32: head byte, left shift and encoded size of t.
const UINT_HEAD = new Uint8Array(33);
const UINT_SHIFT = new Uint8Array(33);
const UINT_STEP = new Uint8Array(33);
for (let z = 0; z <= 32; z++) {
  const bytes = z <= 15 ? 4 : z <= 23 ? 2 : 1;
  UINT_HEAD[z] = bytes === 4 ? 0x1a : bytes === 2 ? 0x19 : 0x18;
  UINT_SHIFT[z] = 8 * (4 - bytes);
  UINT_STEP[z] = 1 + bytes;
}

/**
 * Canonical CBOR (RFC 8949 §4.2.1 shortest forms, as `cbor2.dumps(..., canonical=True)`) of
 * vLLM's hashed tuple `(parent_bytes, tuple(tokens), extra_or_None)`, written into one reused
 * buffer. The parent hash lives at a fixed offset, so a chain writes each digest straight into
 * that slot (`parent()`) and only the token part is rewritten per block.
 */
export class CborChainEncoder {
  #buf: Uint8Array;
  readonly #parentAt: number;
  readonly #parentLength: number;
  readonly #tokensAt: number;

  constructor(parentLength: number) {
    if (parentLength > 255) throw new RangeError("parent hash longer than 255 bytes");
    this.#parentLength = parentLength;
    this.#buf = new Uint8Array(4096);
    let p = 0;
    this.#buf[p++] = 0x83; // array(3)
    p = writeHead(this.#buf, p, 2, parentLength); // byte string(parentLength)
    this.#parentAt = p;
    this.#tokensAt = p + parentLength;
  }

  /** The parent-hash slot; valid until the next `encodeBlock` (which may grow the buffer). */
  parent(): Uint8Array {
    return this.#buf.subarray(this.#parentAt, this.#parentAt + this.#parentLength);
  }

  /** Encodes the block `tokens[start, end)` with the current parent; returns a view of the bytes. */
  encodeBlock(
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    extra: ExtraTuple,
  ): Uint8Array {
    const n = end - start;
    const need = this.#tokensAt + 10 + 9 * n + extraSize(extra);
    if (need > this.#buf.length) this.#grow(need);
    const b = this.#buf;
    let p = writeHead(b, this.#tokensAt, 4, n);
    for (let i = start; i < end; i++) {
      const t = tokens[i];
      if ((t >>> 0) !== t) {
        p = writeWideInt(b, p, t, i);
      } else if (t < 24) {
        b[p++] = t;
      } else {
        // Size class from the leading-zero count, not from comparisons: mixed token ids make
        // a 0x18/0x19/0x1a branch ladder mispredict. Always store 4 value bytes (big-endian,
        // shifted to the front) and advance by the real size; the next write overwrites the rest.
        const z = Math.clz32(t);
        b[p] = UINT_HEAD[z];
        const v = t << UINT_SHIFT[z];
        b[p + 1] = v >>> 24;
        b[p + 2] = v >> 16;
        b[p + 3] = v >> 8;
        b[p + 4] = v;
        p += UINT_STEP[z];
      }
    }
    if (extra === null) {
      b[p++] = 0xf6; // null
    } else {
      p = writeHead(b, p, 4, extra.length);
      for (const key of extra) {
        if (!isTupleKey(key)) {
          p = writeText(b, p, key);
          continue;
        }
        p = writeHead(b, p, 4, key.length); // a tagged key: tuples are arrays in cbor2
        for (const e of key) p = writeText(b, p, e);
      }
    }
    return b.subarray(0, p);
  }

  #grow(need: number): void {
    const bigger = new Uint8Array(Math.max(need, this.#buf.length * 2));
    bigger.set(this.#buf.subarray(0, this.#tokensAt));
    this.#buf = bigger;
  }
}

/** Upper bound of the encoded size of an extra-keys tuple (9 bytes per head). */
function extraSize(extra: ExtraTuple): number {
  if (extra === null) return 1;
  let size = 9;
  for (const key of extra) {
    for (const e of isTupleKey(key) ? key : [key]) size += 9 + e.utf8.length;
    size += 9;
  }
  return size;
}

function writeText(b: Uint8Array, p: number, e: ExtraItem): number {
  p = writeHead(b, p, 3, e.utf8.length);
  b.set(e.utf8, p);
  return p + e.utf8.length;
}

/** Canonical CBOR of a text string: the encoding vLLM hashes for the root seed. */
export function cborText(text: string): Uint8Array {
  const utf8 = new TextEncoder().encode(text);
  const out = new Uint8Array(9 + utf8.length);
  const p = writeHead(out, 0, 3, utf8.length);
  out.set(utf8, p);
  return out.subarray(0, p + utf8.length);
}

/** Writes a CBOR head (major type + shortest argument) at `p`; returns the next offset. */
function writeHead(b: Uint8Array, p: number, major: number, value: number): number {
  const m = major << 5;
  if (value < 24) {
    b[p++] = m | value;
  } else if (value < 0x100) {
    b[p++] = m | 24;
    b[p++] = value;
  } else if (value < 0x10000) {
    b[p++] = m | 25;
    b[p++] = value >> 8;
    b[p++] = value;
  } else if (value < 0x100000000) {
    b[p++] = m | 26;
    b[p++] = value >>> 24;
    b[p++] = value >> 16;
    b[p++] = value >> 8;
    b[p++] = value;
  } else {
    const hi = Math.floor(value / 0x100000000);
    const lo = value >>> 0;
    b[p++] = m | 27;
    b[p++] = hi >>> 24;
    b[p++] = hi >> 16;
    b[p++] = hi >> 8;
    b[p++] = hi;
    b[p++] = lo >>> 24;
    b[p++] = lo >> 16;
    b[p++] = lo >> 8;
    b[p++] = lo;
  }
  return p;
}

/** Tokens outside uint32: negative ints (major type 1) and 64-bit values; rejects non-integers. */
function writeWideInt(b: Uint8Array, p: number, t: number, index: number): number {
  if (!Number.isSafeInteger(t)) {
    throw new TypeError(`Token at index ${index} is ${t}: token ids must be integers`);
  }
  return t >= 0 ? writeHead(b, p, 0, t) : writeHead(b, p, 1, -1 - t);
}
