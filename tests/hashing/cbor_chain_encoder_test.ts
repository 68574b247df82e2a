import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import { createHash } from "node:crypto";
import { Encoder } from "cbor-x";
import { CborChainEncoder, cborText } from "../../src/hashing/cbor_chain_encoder.ts";
import { extraTuples } from "../../src/hashing/extra_tuple.ts";
import { bytesToHex, hexToBytes } from "../../src/hashing/hex.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { mulberry32 } from "../../src/sim/rng.ts";

// cbor2 (vLLM's encoder) is not installable here, so expected bytes are either written out by
// hand from RFC 8949 (shortest-form heads: 0-23 inline, 0x18 u8, 0x19 u16, 0x1a u32, 0x1b u64;
// major types 0 uint, 1 negint, 2 bytes, 3 text, 4 array; 0xf6 null) or produced by cbor-x with
// the options that make it canonical for this shape (it writes |n| >= 2^32 as float64 unless
// given a BigInt, so those are passed as BigInt).
const reference = new Encoder({ useRecords: false, tagUint8Array: false });
const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
const ascii = (s: string) => bytesToHex(new TextEncoder().encode(s));

function encode(
  parent: Uint8Array,
  tokens: number[],
  extra: ReturnType<typeof extraTuples>["first"],
) {
  const encoder = new CborChainEncoder(parent.length);
  encoder.parent().set(parent);
  return bytesToHex(encoder.encodeBlock(tokens, 0, tokens.length, extra));
}

function referenceHex(parent: Uint8Array, tokens: number[], extra: string[] | null): string {
  const wide = tokens.map((t) => (Math.abs(t) >= 2 ** 32 ? BigInt(t) : t));
  return bytesToHex(reference.encode([parent, wide, extra]));
}

Deno.test("CborChainEncoder writes RFC 8949 shortest-form integers at every size boundary", () => {
  const parent = new Uint8Array(32).fill(0xab);
  const tokens = [
    0,
    23,
    24,
    255,
    256,
    65535,
    65536,
    2 ** 32 - 1,
    2 ** 32,
    2 ** 53 - 1,
    -1,
    -24,
    -25,
    -257,
  ];
  const expected = "83" + "5820" + "ab".repeat(32) + "8e" + // array(3), bytes(32), array(14)
    "00" + "17" + "1818" + "18ff" + "190100" + "19ffff" + "1a00010000" + "1affffffff" +
    "1b0000000100000000" + "1b001fffffffffffff" + "20" + "37" + "3818" + "390100" + "f6";
  strictEqual(encode(parent, tokens, null), expected);
});

Deno.test("CborChainEncoder writes a 16-byte parent (xxhash_cbor) with the one-byte head 0x50", () => {
  const parent = new Uint8Array(16).fill(1);
  strictEqual(encode(parent, [1, 2], null), "83" + "50" + "01".repeat(16) + "82" + "0102" + "f6");
});

Deno.test("CborChainEncoder writes extra keys as an array of text strings in vLLM's order", () => {
  const parent = new Uint8Array(32);
  const { first, rest } = extraTuples({ loraName: "lora-a", cacheSalt: "salt-1" }, "plain");
  const head = "835820" + "00".repeat(32) + "84" + "01020304";
  strictEqual(
    encode(parent, [1, 2, 3, 4], first),
    head + "82" + "66" + ascii("lora-a") + "66" + ascii("salt-1"),
  );
  strictEqual(encode(parent, [1, 2, 3, 4], rest), head + "81" + "66" + ascii("lora-a"));
});

Deno.test("CborChainEncoder matches cbor-x on 300 random blocks of mixed token sizes", () => {
  const random = mulberry32(42); // deterministic: failures replay
  const encoder = new CborChainEncoder(32);
  const parent = new Uint8Array(32);
  const pick = () => {
    const r = random();
    if (r < 0.2) return Math.floor(random() * 300); // around the 23/24 and 255/256 edges
    if (r < 0.5) return Math.floor(random() * 70000); // around 65535/65536
    if (r < 0.9) return Math.floor(random() * 151936); // Qwen3 vocabulary
    if (r < 0.95) return Math.floor(random() * 2 ** 40);
    return -Math.floor(random() * 2 ** 33) - 1;
  };
  for (let n = 0; n < 300; n++) {
    for (let i = 0; i < 32; i++) parent[i] = Math.floor(random() * 256);
    const length = n === 0 ? 70000 : 1 + Math.floor(random() * 600); // 70000: the 0x9a array head
    const tokens = Array.from({ length }, pick);
    const extra = n % 3 === 0 ? ["lora-" + n, "salt"] : null;
    encoder.parent().set(parent);
    const got = encoder.encodeBlock(
      tokens,
      0,
      length,
      extra && extraTuples({ loraName: extra[0], cacheSalt: extra[1] }, "plain").first,
    );
    strictEqual(
      bytesToHex(got),
      referenceHex(parent, tokens, extra),
      `block ${n} (${length} tokens)`,
    );
  }
});

Deno.test("cborText matches cbor-x for short, 24+, 256+ byte and non-ASCII seeds", () => {
  for (
    const text of [
      "0",
      "42",
      "x".repeat(23),
      "x".repeat(24),
      "y".repeat(300),
      "é🙂",
      "z".repeat(70000),
    ]
  ) {
    strictEqual(bytesToHex(cborText(text)), bytesToHex(reference.encode(text)), text.slice(0, 10));
  }
});

Deno.test("CborChainEncoder rejects fractional and unsafe token ids, naming the index", () => {
  const encoder = new CborChainEncoder(32);
  throws(() => encoder.encodeBlock([1, 2.5], 0, 2, null), /index 1 is 2\.5/);
  throws(() => encoder.encodeBlock([2 ** 60], 0, 1, null), /index 0/);
  throws(() => encoder.encodeBlock([NaN], 0, 1, null), /integers/);
});

Deno.test("the sha256_cbor chain hashes canonical CBOR of (parent, tokens, extra) from the seed's root", () => {
  const root = sha256(hexToBytes("6130")); // cbor("0")
  strictEqual(root.slice(0, 8), "4e1195df"); // docs/compat.md §2
  const block = (parentHex: string, tokens: string, extra: string) =>
    sha256(hexToBytes("835820" + parentHex + tokens + extra));
  // Salt only: ("s",) on block 0, None afterwards.
  const s0 = block(root, "8401020304", "81" + "61" + ascii("s"));
  const s1 = block(s0, "8405060708", "f6");
  // LoRA and salt: (lora, salt) on block 0, (lora,) afterwards.
  const l0 = block(root, "8401020304", "82" + "62" + ascii("lo") + "61" + ascii("s"));
  const l1 = block(l0, "8405060708", "81" + "62" + ascii("lo"));
  const scheme = createKeyScheme({
    hash: "sha256_cbor",
    seed: "0",
    chunkSize: 4,
    keyFormat: "{hex}",
    extraKeys: "plain",
  });
  const tokens = [1, 2, 3, 4, 5, 6, 7, 8];
  deepStrictEqual(scheme.blockHashes(tokens, { cacheSalt: "s" }), [s0, s1]);
  deepStrictEqual(scheme.blockHashes(tokens, { loraName: "lo", cacheSalt: "s" }), [l0, l1]);
  const n0 = block(root, "8401020304", "f6");
  deepStrictEqual(scheme.blockHashes(tokens), [n0, block(n0, "8405060708", "f6")]);
});
