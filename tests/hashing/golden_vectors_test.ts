import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { bytesToHex } from "../../src/hashing/hex.ts";
import {
  createKeyScheme,
  HASH_ALGORITHMS,
  hashBlocks,
  keysFromHashes,
} from "../../src/hashing/key_scheme.ts";
import type { HashAlgorithm, KeySchemeOptions } from "../../src/hashing/types.ts";

interface VectorCase {
  name: string;
  hash: HashAlgorithm;
  seed: string;
  chunkSize: number;
  saveUnfullChunk: boolean;
  tokens: number[];
  blockHashes: string[];
}

interface KeyCase {
  format: string;
  params: Partial<KeySchemeOptions>;
  blockHashes: string[];
  keys: string[];
}

const vectors: { cases: VectorCase[]; keys: KeyCase[] } = JSON.parse(
  await Deno.readTextFile(new URL("../data/hash_vectors.json", import.meta.url)),
);

/** The printed form of a raw digest: decimal uint64 (big-endian) for xxh64_cumulative, else hex. */
function printed(hash: HashAlgorithm, digest: Uint8Array): string {
  if (hash !== "xxh64_cumulative") return bytesToHex(digest);
  return BigInt(`0x${bytesToHex(digest)}`).toString();
}

Deno.test("hash_vectors.json holds the 160 chain cases and 4 key cases the suite expects", () => {
  strictEqual(vectors.cases.length, 160);
  strictEqual(vectors.keys.length, 4);
  deepStrictEqual(new Set(vectors.cases.map((c) => c.hash)), new Set(HASH_ALGORITHMS));
});

for (const hash of HASH_ALGORITHMS) {
  Deno.test(`${hash} reproduces every golden block hash of hash_vectors.json`, async (t) => {
    const cases = vectors.cases.filter((c) => c.hash === hash);
    for (const c of cases) {
      await t.step(c.name, () => {
        const options = {
          hash: c.hash,
          seed: c.seed,
          chunkSize: c.chunkSize,
          saveUnfullChunk: c.saveUnfullChunk,
        };
        const scheme = createKeyScheme({ ...options, keyFormat: "{hex}" });
        deepStrictEqual(scheme.blockHashes(c.tokens), c.blockHashes);
        deepStrictEqual(hashBlocks(c.tokens, options).map((d) => printed(hash, d)), c.blockHashes);
      });
    }
  });
}

Deno.test("every golden key layout of hash_vectors.json is rebuilt from its block hashes", async (t) => {
  for (const k of vectors.keys) {
    await t.step(k.format, () => {
      deepStrictEqual(keysFromHashes(k.blockHashes, { keyFormat: k.format, ...k.params }), k.keys);
    });
  }
});

Deno.test("the golden key cases also come out of a full key scheme fed the golden tokens", () => {
  // The llumnix / vllm / lmcache key cases use the sha256_cbor seed "0" chunk-4 hashes of 1..10,
  // and the sglang case the sha256_hex chunk-4 hashes of the same tokens.
  const tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  for (const k of vectors.keys) {
    const hash = k.format === "sglang-hicache" ? "sha256_hex" : "sha256_cbor";
    const scheme = createKeyScheme({
      hash,
      seed: "0",
      chunkSize: 4,
      keyFormat: k.format,
      ...k.params,
    });
    deepStrictEqual(scheme.keys(tokens), k.keys);
  }
});
