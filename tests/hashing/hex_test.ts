import { strictEqual, throws } from "node:assert/strict";
import { bytesToHex, hexToBytes, hexToBytesInto } from "../../src/hashing/hex.ts";

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
