/**
 * GPT-2's byte-level alphabet: every byte maps to one printable code point, so byte-level BPE
 * vocabularies (Qwen, Llama 3, DeepSeek...) store their tokens as strings of these code points.
 */

function buildByteToChar(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const table = new Array<string>(256);
  for (const b of printable) table[b] = String.fromCodePoint(b);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    if (table[b] === undefined) table[b] = String.fromCodePoint(next++);
  }
  return table;
}

/** `BYTE_TO_CHAR[b]` is the vocabulary character standing for byte `b`. */
export const BYTE_TO_CHAR: readonly string[] = Object.freeze(buildByteToChar());

/** Code unit -> byte, -1 where the code unit is not in the alphabet (all of it is below 324). */
const CHAR_TO_BYTE: Int16Array = (() => {
  const table = new Int16Array(324).fill(-1);
  BYTE_TO_CHAR.forEach((c, b) => (table[c.charCodeAt(0)] = b));
  return table;
})();

/** Whether every character of a vocabulary token belongs to the byte-level alphabet. */
export function isByteLevelToken(token: string): boolean {
  for (let i = 0; i < token.length; i++) {
    const unit = token.charCodeAt(i);
    if (unit >= 324 || CHAR_TO_BYTE[unit] < 0) return false;
  }
  return token.length > 0;
}

/** The bytes a byte-level vocabulary token stands for, or undefined if it is not byte-level. */
export function byteLevelTokenBytes(token: string): Uint8Array | undefined {
  if (!isByteLevelToken(token)) return undefined;
  const out = new Uint8Array(token.length);
  for (let i = 0; i < token.length; i++) out[i] = CHAR_TO_BYTE[token.charCodeAt(i)];
  return out;
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Base64 of the bytes a byte-level token stands for (the token must be byte-level). */
export function byteLevelTokenBase64(token: string): string {
  let out = "";
  const n = token.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (CHAR_TO_BYTE[token.charCodeAt(i)] << 16) |
      (CHAR_TO_BYTE[token.charCodeAt(i + 1)] << 8) | CHAR_TO_BYTE[token.charCodeAt(i + 2)];
    out += BASE64[v >> 18] + BASE64[(v >> 12) & 63] + BASE64[(v >> 6) & 63] + BASE64[v & 63];
  }
  if (n - i === 1) {
    const v = CHAR_TO_BYTE[token.charCodeAt(i)] << 16;
    out += BASE64[v >> 18] + BASE64[(v >> 12) & 63] + "==";
  } else if (n - i === 2) {
    const v = (CHAR_TO_BYTE[token.charCodeAt(i)] << 16) |
      (CHAR_TO_BYTE[token.charCodeAt(i + 1)] << 8);
    out += BASE64[v >> 18] + BASE64[(v >> 12) & 63] + BASE64[(v >> 6) & 63] + "=";
  }
  return out;
}
