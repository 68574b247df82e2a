import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { ChainMemo } from "../../src/hashing/chain_memo.ts";
import { createVllmChain, type VllmHashAlgorithm } from "../../src/hashing/vllm_chain.ts";
import type { ExtraKeys } from "../../src/hashing/types.ts";
import { mulberry32 } from "../../src/sim/rng.ts";

const ALGORITHMS: VllmHashAlgorithm[] = ["sha256_cbor", "sha256", "xxhash", "xxhash_cbor"];

/** A memo that counts its hits, to show the property below is not met by missing every time. */
class CountingMemo extends ChainMemo {
  hits = 0;
  override find(
    parent: Uint8Array,
    tokens: ArrayLike<number>,
    start: number,
    end: number,
    digestOut: Uint8Array,
  ): string | undefined {
    const hex = super.find(parent, tokens, start, end, digestOut);
    if (hex !== undefined) this.hits++;
    return hex;
  }
}

/** Prompts that share prefixes, branch after them and sometimes carry extra keys or odd ids. */
function prompts(seed: number, count: number): { tokens: number[]; extra?: ExtraKeys }[] {
  const random = mulberry32(seed);
  const stems = Array.from(
    { length: 6 },
    () => Array.from({ length: 16 + Math.floor(random() * 80) }, () => Math.floor(random() * 500)),
  );
  return Array.from({ length: count }, () => {
    const stem = stems[Math.floor(random() * stems.length)];
    const kept = stem.slice(0, Math.floor(random() * (stem.length + 1)));
    const tail = Array.from({ length: Math.floor(random() * 40) }, () => Math.floor(random() * 3));
    const tokens = [...kept, ...tail];
    if (random() < 0.05 && tokens.length > 0) tokens[0] = -1 - Math.floor(random() * 5);
    if (random() < 0.05 && tokens.length > 0) tokens[tokens.length - 1] = 2 ** 40 + 7;
    const extra: ExtraKeys | undefined = random() < 0.2
      ? { cacheSalt: `salt-${random()}` }
      : undefined;
    return { tokens, extra };
  });
}

Deno.test("a chain with its memo gives every digest the chain without one gives", () => {
  for (const algorithm of ALGORITHMS) {
    for (const maxTokens of [64, 1000, 1 << 20]) {
      const memo = new CountingMemo(maxTokens, 4, algorithm.startsWith("sha256") ? 32 : 16);
      const remembering = createVllmChain(algorithm, "7", 4, true, "tagged", memo);
      const plain = createVllmChain(algorithm, "7", 4, true, "tagged", null);
      for (const { tokens, extra } of prompts(maxTokens, 400)) {
        assertEquals(remembering.strings(tokens, extra), plain.strings(tokens, extra));
        assertEquals(remembering.digests(tokens, extra), plain.digests(tokens, extra));
        assert(memo.size <= maxTokens, `${memo.size} tokens held, at most ${maxTokens}`);
      }
      assert(memo.hits > 100, `${algorithm}, ${maxTokens}: only ${memo.hits} hits`);
    }
  }
});

/** A 2-byte digest from a number; its hex is the number in 4 hex digits. */
const d = (n: number) => Uint8Array.of(n >> 8, n & 255);
const hex = (n: number) => n.toString(16).padStart(4, "0");

Deno.test("the memo finds a block only under the same parent with the same tokens", () => {
  const memo = new ChainMemo(1000, 2, 2);
  const out = new Uint8Array(2);
  memo.remember(d(0xaaaa), [1, 2, 3, 4], 1, 3, d(0x0102));
  assertEquals(memo.find(d(0xaaaa), [9, 2, 3], 1, 3, out), "0102");
  assertEquals([...out], [1, 2]);
  assertEquals(memo.find(d(0xaaab), [2, 3], 0, 2, out), undefined);
  assertEquals(memo.find(d(0xaaaa), [2, 4], 0, 2, out), undefined);
  assertEquals(memo.find(d(0xaaaa), [2, 3, 4], 0, 3, out), undefined);
  memo.remember(d(0xaaaa), [-1, 3], 0, 2, d(0x0303));
  memo.remember(d(0xaaaa), [2 ** 33, 3], 0, 2, d(0x0404));
  assertEquals(memo.find(d(0xaaaa), [-1, 3], 0, 2, out), undefined);
  assertEquals(memo.find(d(0xaaaa), [2 ** 33, 3], 0, 2, out), undefined);
});

Deno.test("the memo tells apart parents that share their first bytes", () => {
  const memo = new ChainMemo(1000, 2, 8);
  const out = new Uint8Array(8);
  memo.remember(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), [5, 6], 0, 2, new Uint8Array(8).fill(9));
  assertEquals(memo.find(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 0), [5, 6], 0, 2, out), undefined);
  assertEquals(memo.find(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), [5, 6], 0, 2, out), "09".repeat(8));
});

Deno.test("the memo writes a found digest over its parent when asked to", () => {
  const memo = new ChainMemo(8, 2, 2); // generations of 4 tokens: two 2-token blocks each
  memo.remember(d(7), [1, 1], 0, 2, d(0x0101));
  memo.remember(d(7), [2, 2], 0, 2, d(0x0202));
  memo.remember(d(7), [3, 3], 0, 2, d(0x0303)); // 1 and 2 are now the older generation
  const slot = d(7);
  assertEquals(memo.find(slot, [1, 1], 0, 2, slot), "0101"); // carried, under parent 7
  assertEquals([...slot], [1, 1]);
  assertEquals(memo.find(d(7), [1, 1], 0, 2, new Uint8Array(2)), "0101");
});

Deno.test("the memo keeps a block found in the older generation and forgets the rest", () => {
  const memo = new ChainMemo(8, 2, 2); // generations of 4 tokens: two 2-token blocks each
  const out = new Uint8Array(2);
  const p = d(0x5555);
  memo.remember(p, [1, 1], 0, 2, d(1));
  memo.remember(p, [2, 2], 0, 2, d(2));
  memo.remember(p, [3, 3], 0, 2, d(3)); // a new generation: 1 and 2 are the older one
  assertEquals(memo.find(p, [1, 1], 0, 2, out), hex(1)); // carried into the newer
  memo.remember(p, [4, 4], 0, 2, d(4)); // a new generation again: 2 is dropped
  assertEquals(memo.find(p, [2, 2], 0, 2, out), undefined);
  assertEquals(memo.find(p, [1, 1], 0, 2, out), hex(1));
  assertEquals(memo.find(p, [3, 3], 0, 2, out), hex(3));
  assertEquals(memo.find(p, [4, 4], 0, 2, out), hex(4));
  assert(memo.size <= 8);
});

Deno.test("the memo finds every one of many blocks after one parent", () => {
  const memo = new ChainMemo(1 << 16, 1, 2);
  const out = new Uint8Array(2);
  const p = d(0xabcd);
  for (let t = 0; t < 5000; t++) memo.remember(p, [t], 0, 1, d(t));
  for (let t = 0; t < 5000; t++) assertEquals(memo.find(p, [t], 0, 1, out), hex(t));
  assertEquals([...out], [0x13, 0x87]);
  assertEquals(memo.find(p, [5000], 0, 1, out), undefined);
});
