import { type ExtraItem, type ExtraKey, type ExtraTuple, isTupleKey } from "./extra_tuple.ts";

// Pickle opcodes (CPython Lib/pickle.py).
const PROTO = 0x80;
const FRAME = 0x95;
const SHORT_BINBYTES = 0x43; // 'C'
const SHORT_BINUNICODE = 0x8c;
const BINUNICODE = 0x58; // 'X'
const MEMOIZE = 0x94;
const BINGET = 0x68; // 'h'
const LONG_BINGET = 0x6a; // 'j'
const MARK = 0x28; // '('
const BININT = 0x4a; // 'J'
const BININT1 = 0x4b; // 'K'
const BININT2 = 0x4d; // 'M'
const LONG1 = 0x8a;
const EMPTY_TUPLE = 0x29; // ')'
const TUPLE = 0x74; // 't'
const TUPLE1 = 0x85; // TUPLE2 = 0x86, TUPLE3 = 0x87
const TUPLE3 = 0x87;
const NONE = 0x4e; // 'N'
const STOP = 0x2e; // '.'

/** CPython `_FRAME_SIZE_TARGET`: a frame is committed at the first `save()` once it holds this much. */
const FRAME_SIZE_TARGET = 64 * 1024;
/** CPython `_FRAME_SIZE_MIN`: a shorter frame is written without its FRAME header. */
const FRAME_SIZE_MIN = 4;
const FRAME_HEADER = 9;

// By Math.clz32(t) for 0 <= t < 2^31: BININT1 (t < 256), BININT2 (t < 65536) or BININT.
const INT_OPCODE = new Uint8Array(33);
const INT_STEP = new Uint8Array(33);
for (let z = 0; z <= 32; z++) {
  INT_OPCODE[z] = z >= 24 ? BININT1 : z >= 16 ? BININT2 : BININT;
  INT_STEP[z] = z >= 24 ? 2 : z >= 16 ? 3 : 5;
}

/** Layout of every block pickle: PROTO 5 | FRAME len8 | SHORT_BINBYTES n parent | MEMOIZE | ... */
const FRAME_AT = 2;

/**
 * `pickle.dumps((parent_bytes, tuple(tokens), extra_or_None), protocol=5)` byte for byte as
 * CPython's C pickler writes it (Modules/_pickle.c): frames are opened lazily by the first write,
 * `save()` commits the current frame once it holds >= 64 KiB (so a 16k-token block spans several
 * frames), payloads >= 64 KiB bypass framing, and a final frame under 4 bytes loses its header.
 * Small blocks take a fast path with the frame length patched in at the end.
 */
export class PickleChainEncoder {
  #buf: Uint8Array;
  readonly #parentLength: number;
  readonly #parentAt: number;
  readonly #tokensAt: number;
  // State of the framed writer (slow path only).
  #pos = 0;
  #frameStart = -1;
  #framing = true;
  #memo = 0;

  constructor(parentLength: number) {
    if (parentLength > 255) throw new RangeError("parent hash longer than 255 bytes");
    this.#parentLength = parentLength;
    this.#buf = new Uint8Array(4096);
    const b = this.#buf;
    b[0] = PROTO;
    b[1] = 5;
    b[FRAME_AT] = FRAME;
    b[FRAME_AT + FRAME_HEADER] = SHORT_BINBYTES;
    b[FRAME_AT + FRAME_HEADER + 1] = parentLength;
    this.#parentAt = FRAME_AT + FRAME_HEADER + 2;
    b[this.#parentAt + parentLength] = MEMOIZE; // memo 0: the parent bytes
    this.#tokensAt = this.#parentAt + parentLength + 1;
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
    if (this.#reserve(n, extra)) return this.#encodeFramed(tokens, start, end, extra);

    const b = this.#buf;
    let p = this.#tokensAt;
    if (n > 3) b[p++] = MARK;
    p = writeTokenInts(b, p, tokens, start, end);
    let memo = 1;
    if (n === 0) {
      b[p++] = EMPTY_TUPLE; // the empty tuple is a singleton: CPython does not memoize it
    } else {
      b[p++] = n > 3 ? TUPLE : TUPLE1 + n - 1;
      b[p++] = MEMOIZE;
      memo++;
    }
    if (extra === null) b[p++] = NONE;
    else p = writeExtraOneFrame(b, p, extra, memo);
    b[p++] = TUPLE3;
    b[p++] = MEMOIZE;
    b[p++] = STOP;
    writeU64(b, FRAME_AT + 1, p - FRAME_AT - FRAME_HEADER);
    return b.subarray(0, p);
  }

  /**
   * Grows the buffer to hold a block of `n` tokens; true when the block needs the framed path
   * (one frame would pass 64 KiB, or a string bypasses framing).
   */
  #reserve(n: number, extra: ExtraTuple): boolean {
    // Upper bound of the frame content: LONG1 of a 2^53 token is 9 bytes + MARK/opcode slack.
    let content = this.#tokensAt - FRAME_AT - FRAME_HEADER + 10 * n + 8;
    let largeString = false;
    if (extra !== null) {
      for (const key of extra) {
        content += 2; // TUPLEn + MEMOIZE of a tagged key
        for (const e of isTupleKey(key) ? key : [key]) {
          content += e.utf8.length + 7;
          if (e.utf8.length >= FRAME_SIZE_TARGET) largeString = true;
        }
      }
    }
    const need = FRAME_AT + content + FRAME_HEADER * (3 + Math.ceil(content / FRAME_SIZE_TARGET));
    if (need > this.#buf.length) this.#grow(need);
    return content >= FRAME_SIZE_TARGET || largeString;
  }

  /** The general path: CPython's framing rules applied at every `save()` boundary. */
  #encodeFramed(
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    extra: ExtraTuple,
  ): Uint8Array {
    const n = end - start;
    // PROTO, the first frame (still open) and the memoized parent bytes are already in place.
    this.#pos = this.#tokensAt;
    this.#frameStart = FRAME_AT;
    this.#framing = true;
    this.#memo = 1;
    this.#boundary(); // save(tuple(tokens))
    if (n === 0) {
      this.#byte(EMPTY_TUPLE);
    } else {
      if (n > 3) this.#byte(MARK);
      for (let i = start; i < end; i++) {
        this.#boundary(); // save(token)
        this.#openFrame();
        this.#pos = writeInt(this.#buf, this.#pos, tokens[i], i);
      }
      this.#byte(n > 3 ? TUPLE : TUPLE1 + n - 1);
      this.#byte(MEMOIZE);
      this.#memo++;
    }
    this.#boundary(); // save(extra)
    if (extra === null) this.#byte(NONE);
    else this.#saveExtra(extra);
    this.#byte(TUPLE3);
    this.#byte(MEMOIZE);
    this.#byte(STOP);
    this.#commitFrame();
    return this.#buf.subarray(0, this.#pos);
  }

  /** `pickle.dumps(text, protocol=5)`: the encoding vLLM hashes for the root seed. */
  static encodeString(text: string): Uint8Array {
    const enc = new PickleChainEncoder(0); // a throwaway: this overwrites the block prefix
    const item: ExtraItem = { text, utf8: new TextEncoder().encode(text) };
    const need = 32 + item.utf8.length;
    if (need > enc.#buf.length) enc.#grow(need);
    enc.#pos = 2; // after PROTO 5, which is written before framing starts
    enc.#frameStart = -1;
    enc.#framing = true;
    enc.#memo = 0;
    enc.#boundary(); // save(text)
    enc.#string(item);
    enc.#byte(STOP);
    enc.#commitFrame();
    return enc.#buf.slice(0, enc.#pos);
  }

  /** The extra-keys tuple, with a `save()` boundary before each tagged key and each string. */
  #saveExtra(extra: readonly ExtraKey[]): void {
    const singletons = new Map<string, number>();
    for (const key of extra) {
      if (!isTupleKey(key)) {
        this.#saveString(key, singletons);
        continue;
      }
      this.#boundary(); // save(tagged key)
      for (const e of key) this.#saveString(e, singletons);
      this.#tupleEnd(key.length);
    }
    this.#tupleEnd(extra.length);
  }

  /** save(str): a memo GET when it is a singleton already pickled, else the string. */
  #saveString(e: ExtraItem, singletons: Map<string, number>): void {
    this.#boundary();
    const index = singletons.get(e.text);
    if (index !== undefined) {
      this.#openFrame();
      this.#pos = writeGet(this.#buf, this.#pos, index);
      return;
    }
    if (isSingleton(e.text)) singletons.set(e.text, this.#memo);
    this.#string(e);
  }

  #tupleEnd(n: number): void {
    this.#openFrame();
    this.#pos = writeTupleEnd(this.#buf, this.#pos, n);
    this.#memo++;
  }

  #string(e: ExtraItem): void {
    const u = e.utf8;
    if (u.length >= FRAME_SIZE_TARGET) {
      // _Pickler_write_bytes: commit the frame, write header and payload unframed.
      this.#commitFrame();
      this.#framing = false;
      this.#buf[this.#pos++] = BINUNICODE;
      this.#pos = writeU32(this.#buf, this.#pos, u.length);
      this.#buf.set(u, this.#pos);
      this.#pos += u.length;
      this.#framing = true;
    } else {
      this.#openFrame();
      this.#pos = writeUnicode(this.#buf, this.#pos, u);
    }
    this.#byte(MEMOIZE);
    this.#memo++;
  }

  #byte(op: number): void {
    this.#openFrame();
    this.#buf[this.#pos++] = op;
  }

  /** _Pickler_Write: the first write after a commit reserves a new frame header. */
  #openFrame(): void {
    if (this.#framing && this.#frameStart < 0) {
      this.#frameStart = this.#pos;
      this.#pos += FRAME_HEADER;
    }
  }

  /** _Pickler_OpcodeBoundary, called at the start of every save(). */
  #boundary(): void {
    if (this.#frameStart >= 0 && this.#pos - this.#frameStart - FRAME_HEADER >= FRAME_SIZE_TARGET) {
      this.#commitFrame();
    }
  }

  /** _Pickler_CommitFrame. */
  #commitFrame(): void {
    const start = this.#frameStart;
    if (start < 0) return;
    const len = this.#pos - start - FRAME_HEADER;
    if (len >= FRAME_SIZE_MIN) {
      this.#buf[start] = FRAME;
      writeU64(this.#buf, start + 1, len);
    } else {
      this.#buf.copyWithin(start, start + FRAME_HEADER, this.#pos);
      this.#pos -= FRAME_HEADER;
    }
    this.#frameStart = -1;
  }

  #grow(need: number): void {
    const bigger = new Uint8Array(Math.max(need, this.#buf.length * 2));
    bigger.set(this.#buf.subarray(0, this.#tokensAt));
    this.#buf = bigger;
  }
}

/**
 * CPython keeps "" and the one-character Latin-1 strings as singletons (decoding returns them),
 * so a LoRA name, path and cache_salt that are the same such string are one object, pickled the
 * second time as a memo GET. Every other string the engine decodes is an object of its own.
 */
function isSingleton(text: string): boolean {
  return text.length === 0 || (text.length === 1 && text.charCodeAt(0) <= 0xff);
}

function writeGet(b: Uint8Array, p: number, index: number): number {
  if (index < 0x100) {
    b[p++] = BINGET;
    b[p++] = index;
    return p;
  }
  b[p++] = LONG_BINGET;
  return writeU32(b, p, index);
}

/** The tokens of a one-frame block, each as BININT1 / BININT2 / BININT (LONG1 beyond int32). */
function writeTokenInts(
  b: Uint8Array,
  p: number,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
): number {
  for (let i = start; i < end; i++) {
    const t = tokens[i];
    if ((t >>> 0) !== t || t >= 0x80000000) {
      p = writeWideInt(b, p, t, i);
    } else {
      // Opcode from the leading-zero count instead of a mispredicting branch ladder; always
      // store 4 little-endian bytes and advance by the real size.
      const z = Math.clz32(t);
      b[p] = INT_OPCODE[z];
      b[p + 1] = t;
      b[p + 2] = t >> 8;
      b[p + 3] = t >> 16;
      b[p + 4] = t >>> 24;
      p += INT_STEP[z];
    }
  }
  return p;
}

/** The extra-keys tuple of a one-frame block; `memo` is the next memo index. */
function writeExtraOneFrame(
  b: Uint8Array,
  p: number,
  extra: readonly ExtraKey[],
  memo: number,
): number {
  const singletons = new Map<string, number>();
  const writeString = (e: ExtraItem) => {
    const index = singletons.get(e.text);
    if (index !== undefined) {
      p = writeGet(b, p, index);
      return;
    }
    if (isSingleton(e.text)) singletons.set(e.text, memo);
    p = writeUnicode(b, p, e.utf8);
    b[p++] = MEMOIZE;
    memo++;
  };
  for (const key of extra) {
    if (!isTupleKey(key)) {
      writeString(key);
      continue;
    }
    for (const e of key) writeString(e);
    p = writeTupleEnd(b, p, key.length);
    memo++;
  }
  return writeTupleEnd(b, p, extra.length);
}

/** SHORT_BINUNICODE or BINUNICODE with the UTF-8 bytes (no MEMOIZE). */
function writeUnicode(b: Uint8Array, p: number, u: Uint8Array): number {
  if (u.length <= 0xff) {
    b[p++] = SHORT_BINUNICODE;
    b[p++] = u.length;
  } else {
    b[p++] = BINUNICODE;
    p = writeU32(b, p, u.length);
  }
  b.set(u, p);
  return p + u.length;
}

/** TUPLE1-3 for short tuples, else MARK ... TUPLE (the MARK must already be written). */
function writeTupleEnd(b: Uint8Array, p: number, n: number): number {
  if (n > 3) throw new RangeError("extra-keys tuples longer than 3 are not supported");
  b[p++] = TUPLE1 + n - 1;
  b[p++] = MEMOIZE;
  return p;
}

/** save_long: BININT1 / BININT2 / BININT for int32, LONG1 beyond. */
function writeInt(b: Uint8Array, p: number, t: number, index: number): number {
  if ((t >>> 0) === t && t < 0x100) {
    b[p++] = BININT1;
    b[p++] = t;
    return p;
  }
  if ((t >>> 0) === t && t < 0x10000) {
    b[p++] = BININT2;
    b[p++] = t;
    b[p++] = t >> 8;
    return p;
  }
  return writeWideInt(b, p, t, index);
}

/**
 * Everything `writeInt`'s one- and two-byte cases do not take (callers route 0..65535 there):
 * BININT (signed int32) or LONG1 (two's complement, LE); rejects non-integers.
 */
function writeWideInt(b: Uint8Array, p: number, t: number, index: number): number {
  if (!Number.isSafeInteger(t)) {
    throw new TypeError(`Token at index ${index} is ${t}: token ids must be integers`);
  }
  if (t >= -0x80000000 && t < 0x80000000) {
    b[p++] = BININT;
    return writeU32(b, p, t >>> 0);
  }
  // CPython: nbytes = nbits/8 + 1, then drop one redundant 0xff sign byte of a negative.
  const v = BigInt(t);
  const magnitude = v < 0n ? -v : v;
  let nbytes = (magnitude.toString(2).length >> 3) + 1;
  const twos = v < 0n ? (1n << BigInt(8 * nbytes)) + v : v;
  const bytes: number[] = [];
  for (let k = 0; k < nbytes; k++) bytes.push(Number((twos >> BigInt(8 * k)) & 0xffn));
  if (v < 0n && nbytes > 1 && bytes[nbytes - 1] === 0xff && (bytes[nbytes - 2] & 0x80) !== 0) {
    nbytes--;
  }
  b[p++] = LONG1;
  b[p++] = nbytes;
  for (let k = 0; k < nbytes; k++) b[p++] = bytes[k];
  return p;
}

function writeU32(b: Uint8Array, p: number, v: number): number {
  b[p++] = v;
  b[p++] = v >> 8;
  b[p++] = v >> 16;
  b[p++] = v >>> 24;
  return p;
}

function writeU64(b: Uint8Array, p: number, v: number): void {
  const lo = v >>> 0;
  const hi = Math.floor(v / 0x100000000);
  writeU32(b, p, lo);
  writeU32(b, p + 4, hi);
}
