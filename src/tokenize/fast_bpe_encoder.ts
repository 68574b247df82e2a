/**
 * The fast path: tiktoken's WASM BPE fed a byte-level vocabulary (rank = token id), used segment
 * by segment between added tokens. One WASM encoder per tokenizer, freed by `dispose()`.
 *
 * With pieces (the default of local_tokenizer.ts), a segment is split by the library's own
 * pre-tokenizer RegExp in JavaScript and each piece's ids come from a piece cache, tiktoken only
 * encoding pieces not seen before; tiktoken's own regex then must not split a piece again.
 */
import type { FastPathPlan } from "./fast_path_plan.ts";
import type { PieceCache } from "./piece_cache.ts";
import { splitPieces } from "./pre_tokenizer_split.ts";

/** The part of tiktoken's `Tiktoken` class used here. */
interface TiktokenLike {
  encode_ordinary(text: string): Uint32Array;
  free(): void;
}

/**
 * tiktoken's merge loop is quadratic in the length of one pre-tokenized piece (20k repeated
 * characters take tenths of a second), Hugging Face's is not. A segment holding such a run goes
 * to the exact path instead. Every piece of the byte-level patterns lies within a run of one of
 * these classes: letters and marks, digits, whitespace, anything else. With pieces split in
 * JavaScript the same limit applies to a piece's length.
 */
export const LONG_RUN_CHARS = 512;

/** tiktoken's pattern when the text it gets is already one piece: the whole text, unsplit. */
const WHOLE_PIECE_PATTERN = "[\\s\\S]+";

/** Splitting a segment in JavaScript, and the cache of ids per piece. */
export interface PieceEncoding {
  /** The library's pre-tokenizer RegExp (pre_tokenizer_split.ts). */
  regex: RegExp;
  cache: PieceCache;
}

const enum RunClass {
  Unknown = 0,
  Letter = 1,
  Digit = 2,
  Space = 3,
  Other = 4,
}

const LETTER = /^[\p{L}\p{M}]$/u;
const DIGIT = /^\p{N}$/u;
const SPACE = /^\s$/u;

function classify(char: string): RunClass {
  if (LETTER.test(char)) return RunClass.Letter;
  if (DIGIT.test(char)) return RunClass.Digit;
  if (SPACE.test(char)) return RunClass.Space;
  return RunClass.Other;
}

/** Character classes of the BMP, filled on first sight (a scan is then a table lookup per unit). */
export function newClassTable(): Uint8Array {
  return new Uint8Array(65536);
}

/** Whether `text` holds `limit` or more consecutive characters of one class. */
export function hasLongRun(text: string, limit: number, table: Uint8Array): boolean {
  let run = 0;
  let previous = RunClass.Unknown;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    let cls: RunClass;
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const point = text.codePointAt(i)!;
      cls = classify(String.fromCodePoint(point));
      i++;
    } else {
      cls = table[unit];
      if (cls === RunClass.Unknown) cls = table[unit] = classify(String.fromCharCode(unit));
    }
    if (cls === previous) {
      if (++run >= limit) return true;
    } else {
      previous = cls;
      run = 1;
    }
  }
  return false;
}

export class FastBpeEncoder {
  readonly #tiktoken: TiktokenLike;
  readonly #nfc: boolean;
  readonly #classes = newClassTable();
  readonly #pieces: PieceEncoding | undefined;
  /** Reused between calls: the pieces of a segment, and its ids before they are copied out. */
  readonly #pieceList: string[] = [];
  #ids = new Uint32Array(4096);
  #disposed = false;

  private constructor(tiktoken: TiktokenLike, nfc: boolean, pieces: PieceEncoding | undefined) {
    this.#tiktoken = tiktoken;
    this.#nfc = nfc;
    this.#pieces = pieces;
  }

  static async create(plan: FastPathPlan, pieces?: PieceEncoding): Promise<FastBpeEncoder> {
    const { Tiktoken } = await import("tiktoken/lite");
    const pattern = pieces ? WHOLE_PIECE_PATTERN : plan.pattern;
    return new FastBpeEncoder(new Tiktoken(plan.bpeRanks, {}, pattern), plan.nfc, pieces);
  }

  /** The piece cache, when segments are encoded piece by piece. */
  get pieceCache(): PieceCache | undefined {
    return this.#pieces?.cache;
  }

  /** Normalizes a segment as the tokenizer's normalizer does (NFC or nothing). */
  normalize(segment: string): string {
    return this.#nfc ? segment.normalize("NFC") : segment;
  }

  /** Ids of an already normalized segment, or undefined when it holds a run too long for tiktoken. */
  encodeNormalized(text: string): Uint32Array | undefined {
    if (this.#disposed) throw new Error("The tokenizer was disposed; load it again to encode");
    if (this.#pieces) return this.#encodeByPiece(text, this.#pieces);
    if (text.length >= LONG_RUN_CHARS && hasLongRun(text, LONG_RUN_CHARS, this.#classes)) {
      return undefined;
    }
    return this.#tiktoken.encode_ordinary(text);
  }

  /** Ids piece by piece, cached ones looked up; undefined when a piece is too long for tiktoken. */
  #encodeByPiece(text: string, { regex, cache }: PieceEncoding): Uint32Array | undefined {
    const pieces = splitPieces(text, regex, this.#pieceList);
    let out = this.#ids;
    let n = 0;
    try {
      for (let p = 0; p < pieces.length; p++) {
        const piece = pieces[p];
        if (piece.length >= LONG_RUN_CHARS) return undefined;
        let ids = cache.get(piece);
        if (ids === undefined) {
          ids = this.#tiktoken.encode_ordinary(piece);
          cache.set(piece, ids);
        }
        const count = typeof ids === "number" ? 1 : ids.length;
        if (n + count > out.length) out = this.#growIds(n + count);
        if (typeof ids === "number") out[n++] = ids;
        else {
          out.set(ids, n);
          n += count;
        }
      }
      return out.slice(0, n);
    } finally {
      pieces.length = 0; // keep no reference to the text
    }
  }

  #growIds(minLength: number): Uint32Array<ArrayBuffer> {
    const grown = new Uint32Array(Math.max(minLength, this.#ids.length * 2));
    grown.set(this.#ids);
    return this.#ids = grown;
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#tiktoken.free();
  }
}
