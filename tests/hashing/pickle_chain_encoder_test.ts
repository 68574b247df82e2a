import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { createHash } from "node:crypto";
import { extraTuples } from "../../src/hashing/extra_tuple.ts";
import { bytesToHex, hexToBytes } from "../../src/hashing/hex.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { PickleChainEncoder } from "../../src/hashing/pickle_chain_encoder.ts";

// Expected bytes come from CPython's C pickler (tests/data/gen_pickle_golden.py, run once by
// hand: CI has no python). Big blocks store length, SHA-256 and frame layout instead of bytes.
interface TokenSpec {
  n: number;
  mul: number;
  mod: number;
  off: number;
}
interface GoldenBlock {
  name: string;
  parent: string;
  /** Strings of 1000+ characters are stored as { char, n }. */
  extra: (string | { char: string; n: number })[] | null;
  tokens?: number[];
  tokenSpec?: TokenSpec;
  length: number;
  sha256: string;
  frames: [number, number][];
  bytes?: string;
}
interface GoldenString {
  name: string;
  text?: string;
  textSpec?: { char: string; n: number };
  bytes?: string;
  length?: number;
  sha256?: string;
  head?: string;
  tail?: string;
}

const golden: { blocks: GoldenBlock[]; strings: GoldenString[] } = JSON.parse(
  await Deno.readTextFile(new URL("../data/pickle_golden.json", import.meta.url)),
);

function tokensOf(b: GoldenBlock): number[] {
  if (b.tokens) return b.tokens;
  const { n, mul, mod, off } = b.tokenSpec!;
  return Array.from({ length: n }, (_, i) => (i * mul + off) % mod);
}

function extraOf(b: GoldenBlock) {
  if (b.extra === null) return null;
  const [lora, salt] = b.extra.map((x) => typeof x === "string" ? x : x.char.repeat(x.n));
  return extraTuples({ loraName: lora, cacheSalt: salt }, "plain").first;
}

/** FRAME opcodes at frame starts, as [offset, length], like the Python generator reports. */
function frames(bytes: Uint8Array): [number, number][] {
  const out: [number, number][] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let i = 2;
  while (i < bytes.length && bytes[i] === 0x95) {
    const n = Number(view.getBigUint64(i + 1, true));
    out.push([i, n]);
    i += 9 + n;
  }
  return out;
}

const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

function checkBlock(encoder: PickleChainEncoder, b: GoldenBlock): void {
  const tokens = tokensOf(b);
  encoder.parent().set(hexToBytes(b.parent));
  const bytes = encoder.encodeBlock(tokens, 0, tokens.length, extraOf(b));
  if (b.bytes) strictEqual(bytesToHex(bytes), b.bytes);
  deepStrictEqual(frames(bytes), b.frames);
  strictEqual(bytes.length, b.length);
  strictEqual(sha256(bytes), b.sha256);
}

Deno.test("PickleChainEncoder writes CPython's exact protocol-5 bytes for every golden block", async (t) => {
  for (const b of golden.blocks) {
    await t.step(b.name, () => checkBlock(new PickleChainEncoder(b.parent.length / 2), b));
  }
});

Deno.test("PickleChainEncoder stays exact when one encoder is reused across small and multi-frame blocks", () => {
  const encoder = new PickleChainEncoder(32);
  const blocks = golden.blocks.filter((b) => b.parent.length === 64);
  for (const b of [...blocks, ...blocks.slice().reverse()]) checkBlock(encoder, b);
});

Deno.test("PickleChainEncoder encodes a block taken from the middle of a longer token array", () => {
  const b = golden.blocks.find((x) => x.name.startsWith("five tokens"))!;
  const encoder = new PickleChainEncoder(32);
  encoder.parent().set(hexToBytes(b.parent));
  const padded = [99, 98, ...b.tokens!, 97];
  strictEqual(bytesToHex(encoder.encodeBlock(padded, 2, 2 + b.tokens!.length, null)), b.bytes);
});

Deno.test("PickleChainEncoder.encodeString pickles seeds exactly, including an unframed 70000-char one", async (t) => {
  for (const s of golden.strings) {
    await t.step(s.name, () => {
      const text = s.text ?? s.textSpec!.char.repeat(s.textSpec!.n);
      const bytes = PickleChainEncoder.encodeString(text);
      if (s.bytes) {
        strictEqual(bytesToHex(bytes), s.bytes);
      } else {
        strictEqual(bytes.length, s.length);
        strictEqual(bytesToHex(bytes.subarray(0, 16)), s.head);
        strictEqual(bytesToHex(bytes.subarray(bytes.length - 8)), s.tail);
        strictEqual(sha256(bytes), s.sha256);
      }
    });
  }
});

Deno.test("the sha256 (pickle) chain puts LoRA on every block and cache_salt on the first block only", () => {
  // Expected: CPython's bytes for (parent, (1,2,3,4), ("lora-a","salt-1")) and (parent, (1,2,3,4),
  // ("lora-a",)) with the parent slot (offset 13, 32 bytes) swapped for the real chain parent.
  const withSalt = golden.blocks.find((b) => b.name === "lora and cache_salt")!;
  const loraOnly = golden.blocks.find((b) => b.name === "lora only")!;
  const seedPickle = hexToBytes(golden.strings.find((s) => s.text === "0")!.bytes!);
  const root = sha256(seedPickle);
  strictEqual(root.slice(0, 8), "1973e238"); // docs/compat.md §2: sha256 root of seed "0"
  const block = (goldenBytes: string, parentHex: string) => {
    const bytes = hexToBytes(goldenBytes);
    bytes.set(hexToBytes(parentHex), 13);
    return sha256(bytes);
  };
  const h0 = block(withSalt.bytes!, root);
  const h1 = block(loraOnly.bytes!, h0);
  const h2 = block(loraOnly.bytes!, h1);
  const scheme = createKeyScheme({
    hash: "sha256",
    seed: "0",
    chunkSize: 4,
    keyFormat: "{hex}",
    extraKeys: "plain",
  });
  const tokens = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4];
  deepStrictEqual(scheme.blockHashes(tokens, { loraName: "lora-a", cacheSalt: "salt-1" }), [
    h0,
    h1,
    h2,
  ]);
});
