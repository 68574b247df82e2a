/**
 * The fast path: tiktoken's WASM BPE fed a byte-level vocabulary (rank = token id), used segment
 * by segment between added tokens. One WASM encoder per tokenizer, freed by `dispose()`.
 */
import type { FastPathPlan } from "./fast_path_plan.ts";

/** The part of tiktoken's `Tiktoken` class used here. */
interface TiktokenLike {
  encode_ordinary(text: string): Uint32Array;
  free(): void;
}

/**
 * tiktoken's merge loop is quadratic in the length of one pre-tokenized piece (20k repeated
 * characters take tenths of a second), Hugging Face's is not. A segment holding such a run goes
 * to the exact path instead. Every piece of the byte-level patterns lies within a run of one of
 * these classes: letters and marks, digits, whitespace, anything else.
 */
export const LONG_RUN_CHARS = 512;

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
function newClassTable(): Uint8Array {
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
  #disposed = false;

  private constructor(tiktoken: TiktokenLike, nfc: boolean) {
    this.#tiktoken = tiktoken;
    this.#nfc = nfc;
  }

  static async create(plan: FastPathPlan): Promise<FastBpeEncoder> {
    const { Tiktoken } = await import("tiktoken/lite");
    return new FastBpeEncoder(new Tiktoken(plan.bpeRanks, {}, plan.pattern), plan.nfc);
  }

  /** Normalizes a segment as the tokenizer's normalizer does (NFC or nothing). */
  normalize(segment: string): string {
    return this.#nfc ? segment.normalize("NFC") : segment;
  }

  /** Ids of an already normalized segment, or undefined when it holds a run too long for tiktoken. */
  encodeNormalized(text: string): Uint32Array | undefined {
    if (this.#disposed) throw new Error("The tokenizer was disposed; load it again to encode");
    if (text.length >= LONG_RUN_CHARS && hasLongRun(text, LONG_RUN_CHARS, this.#classes)) {
      return undefined;
    }
    return this.#tiktoken.encode_ordinary(text);
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#tiktoken.free();
  }
}
