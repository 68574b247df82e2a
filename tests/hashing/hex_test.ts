import { strictEqual, throws } from "node:assert/strict";
import {
  bytesToHex,
  bytesToHexByTable,
  hexToBytes,
  hexToBytesInto,
  hexToBytesIntoByTable,
} from "../../src/hashing/hex.ts";
import { mulberry32 } from "../../src/sim/rng.ts";

Deno.test("bytesToHex and hexToBytes round-trip every byte value in lowercase", () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const hex = bytesToHex(all);
  strictEqual(hex.slice(0, 8), "00010203");
  strictEqual(hex.slice(-4), "feff");
  strictEqual(bytesToHex(hexToBytes(hex)), hex);
  strictEqual(bytesToHex(hexToBytes("ABcdEF")), "abcdef");
});

Deno.test("hexToBytesInto writes at an offset and rejects bad digits, odd lengths and overflow", () => {
  const out = new Uint8Array(4);
  hexToBytesInto("beef", out, 2);
  strictEqual(bytesToHex(out), "0000beef");
  throws(() => hexToBytesInto("zz", out), /Invalid hex digit/);
  throws(() => hexToBytesInto("abc", out), /Cannot decode/);
  throws(() => hexToBytesInto("0011223344", out), /Cannot decode/);
});

Deno.test("the native hex conversions and the tables agree, and both refuse non-hex characters", () => {
  const random = mulberry32(5);
  for (let n = 0; n < 200; n++) {
    const bytes = Uint8Array.from({ length: n % 40 }, () => Math.floor(random() * 256));
    const hex = bytesToHex(bytes);
    strictEqual(hex, bytesToHexByTable(bytes));
    const native = new Uint8Array(bytes.length + 3);
    const table = new Uint8Array(bytes.length + 3);
    hexToBytesInto(hex.toUpperCase(), native, 3);
    hexToBytesIntoByTable(hex.toUpperCase(), table, 3);
    strictEqual(bytesToHex(native), bytesToHex(table));
    strictEqual(bytesToHex(native.subarray(3)), hex);
  }
  // U+0130 & 127 is "0": a table indexed by the low 7 bits alone would take it for a digit.
  for (const decode of [hexToBytesInto, hexToBytesIntoByTable]) {
    throws(() => decode("\u0130\u0130", new Uint8Array(1)), /Invalid hex digit/);
    throws(() => decode("0g", new Uint8Array(1)), /Invalid hex digit/);
  }
});
