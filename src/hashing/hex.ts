/** Lowercase hex of every byte value, built once: hex conversion is on the per-chunk path. */
const BYTE_TO_HEX: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => b.toString(16).padStart(2, "0"),
);

/** Nibble value of each ASCII code (`0-9a-fA-F`), 255 for anything else. */
const HEX_TO_NIBBLE: Uint8Array = (() => {
  const table = new Uint8Array(128).fill(255);
  for (let i = 0; i < 10; i++) table[48 + i] = i;
  for (let i = 0; i < 6; i++) {
    table[97 + i] = 10 + i;
    table[65 + i] = 10 + i;
  }
  return table;
})();

/** Uint8Array's own hex methods (TC39's "Uint8Array to/from base64 and hex"), where present. */
interface NativeHex {
  toHex?: () => string;
  setFromHex?: (hex: string) => { read: number; written: number };
}
const NATIVE = new Uint8Array(0) as Uint8Array & NativeHex;
const NATIVE_FROM_HEX = typeof NATIVE.setFromHex === "function";

/** Lowercase hex of `bytes`: natively where the runtime can (tests/bench/hash_bench.ts). */
export const bytesToHex: (bytes: Uint8Array) => string = typeof NATIVE.toHex === "function"
  ? (bytes) => (bytes as Uint8Array & Required<NativeHex>).toHex()
  : bytesToHexByTable;

/** Lowercase hex of `bytes` from a table: the fallback, and the benchmark's reference. */
export function bytesToHexByTable(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += BYTE_TO_HEX[bytes[i]];
  return out;
}

/**
 * Decodes `hex` into `out` starting at `offset`; `hex` must hold exactly
 * `2 * n` hex digits for the `n` bytes written.
 */
export function hexToBytesInto(hex: string, out: Uint8Array, offset = 0): void {
  const n = hex.length >>> 1;
  if (hex.length !== n * 2 || offset + n > out.length) {
    throw new RangeError(
      `Cannot decode hex of length ${hex.length} into ${out.length - offset} bytes`,
    );
  }
  if (!NATIVE_FROM_HEX) return hexToBytesIntoByTable(hex, out, offset);
  const whole = offset === 0 && n === out.length;
  const target = (whole ? out : out.subarray(offset, offset + n)) as Uint8Array & NativeHex;
  try {
    target.setFromHex!(hex);
  } catch {
    throw new RangeError(`Invalid hex digit in "${hex}"`);
  }
}

/** `hexToBytesInto` from a table: the fallback, and the benchmark's reference. */
export function hexToBytesIntoByTable(hex: string, out: Uint8Array, offset = 0): void {
  const n = hex.length >>> 1;
  for (let i = 0; i < n; i++) {
    const hi = nibble(hex.charCodeAt(2 * i));
    const lo = nibble(hex.charCodeAt(2 * i + 1));
    if ((hi | lo) === 255) throw new RangeError(`Invalid hex digit in "${hex}"`);
    out[offset + i] = (hi << 4) | lo;
  }
}

function nibble(code: number): number {
  return code < 128 ? HEX_TO_NIBBLE[code] : 255;
}

/** Bytes of a hex string (either case). */
export function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length >>> 1);
  hexToBytesInto(hex, out);
  return out;
}
