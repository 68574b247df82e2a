import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import { CborChainEncoder } from "../../src/hashing/cbor_chain_encoder.ts";
import { extraTuples } from "../../src/hashing/extra_tuple.ts";
import { bytesToHex, hexToBytes } from "../../src/hashing/hex.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import { PickleChainEncoder } from "../../src/hashing/pickle_chain_encoder.ts";
import type {
  ExtraKeys,
  ExtraKeyStyle,
  KeyScheme,
  KeySchemeOptions,
} from "../../src/hashing/types.ts";

// vLLM's own hashes (0.32.0 tagged, 0.30.0 plain) from tests/hashing/gen_extra_keys_golden.py,
// run by hand: CI has no python. Long strings are stored as { repeat, n, suffix }.
type Text = string | { repeat: string; n: number; suffix: string };
interface VectorRequest {
  name: string;
  blockSize: number;
  tokens?: number[];
  tokenSpec?: { n: number; mul: number; mod: number; off: number };
  lora: { name: Text; path: Text } | null;
  cacheSalt: Text | null;
}
interface VectorResult {
  request: number;
  style: ExtraKeyStyle;
  hash: "sha256" | "sha256_cbor" | "xxhash" | "xxhash_cbor";
  /** null: PYTHONHASHSEED unset (vLLM's default seed). */
  pythonhashseed: string | null;
  noneHash: string;
  blockHashes: string[];
  block0Length?: number;
  block0Bytes?: string;
}

const vectors: {
  vllm: Record<ExtraKeyStyle, string>;
  requests: VectorRequest[];
  results: VectorResult[];
} = JSON.parse(
  await Deno.readTextFile(new URL("../data/extra_keys_vectors.json", import.meta.url)),
);

const text = (t: Text) => typeof t === "string" ? t : t.repeat.repeat(t.n) + t.suffix;

const requests = vectors.requests.map((r) => {
  const extra: ExtraKeys = {};
  if (r.lora) {
    extra.loraName = text(r.lora.name);
    extra.loraPath = text(r.lora.path);
  }
  if (r.cacheSalt !== null) extra.cacheSalt = text(r.cacheSalt);
  const { n, mul, mod, off } = r.tokenSpec ?? { n: 0, mul: 0, mod: 1, off: 0 };
  const tokens = r.tokens ?? Array.from({ length: n }, (_, i) => (i * mul + off) % mod);
  return { ...r, extra, tokens };
});

/** One scheme per chain, seed, style and block size: the root is computed once. */
const schemes = new Map<string, KeyScheme>();
function schemeFor(r: VectorResult): KeyScheme {
  const options: KeySchemeOptions = {
    hash: r.hash,
    chunkSize: requests[r.request].blockSize,
    keyFormat: "{hex}",
    extraKeys: r.style,
  };
  if (r.pythonhashseed !== null) options.seed = r.pythonhashseed;
  const id = JSON.stringify(options);
  let scheme = schemes.get(id);
  if (!scheme) schemes.set(id, scheme = createKeyScheme(options));
  return scheme;
}

const label = (r: VectorResult) =>
  `${requests[r.request].name}, PYTHONHASHSEED ${r.pythonhashseed ?? "unset"}`;

Deno.test("extra_keys_vectors.json: vLLM 0.31+ tagged and 0.30 plain, 4 chains, seeds set and unset", () => {
  strictEqual(vectors.vllm.plain, "0.30.0");
  ok(vectors.vllm.tagged >= "0.31.0", vectors.vllm.tagged);
  strictEqual(vectors.requests.length, 41);
  strictEqual(vectors.results.length, 820);
  const combos = new Set(vectors.results.map((r) => `${r.style} ${r.hash} ${r.pythonhashseed}`));
  strictEqual(combos.size, 20); // 2 styles x (4 chains x 2 seeds + sha256 / sha256_cbor unset)
});

for (const style of ["tagged", "plain"] as const) {
  for (const hash of ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"] as const) {
    Deno.test(`${hash} "${style}" reproduces vLLM's block hashes for LoRA / cache_salt`, async (t) => {
      for (const r of vectors.results.filter((x) => x.style === style && x.hash === hash)) {
        await t.step(label(r), () => {
          const { tokens, extra } = requests[r.request];
          deepStrictEqual(schemeFor(r).blockHashes(tokens, extra), r.blockHashes);
        });
      }
    });
  }
}

Deno.test("both encoders write vLLM's exact bytes for the first block of each request", async (t) => {
  for (const r of vectors.results.filter((x) => x.block0Length !== undefined)) {
    await t.step(`${r.hash} ${r.style}: ${label(r)}`, () => {
      const { tokens, extra, blockSize } = requests[r.request];
      const parent = hexToBytes(r.noneHash);
      const encoder = r.hash === "sha256"
        ? new PickleChainEncoder(parent.length)
        : new CborChainEncoder(parent.length);
      encoder.parent().set(parent);
      const first = extraTuples(extra, r.style).first;
      const bytes = encoder.encodeBlock(tokens, 0, blockSize, first);
      strictEqual(bytes.length, r.block0Length);
      if (r.block0Bytes) strictEqual(bytesToHex(bytes), r.block0Bytes);
    });
  }
});
