import { assertEquals, assertMatch } from "../assert.ts";
import { countKeyShapes, keyShape, shapeMismatch } from "../../src/hashing/key_shapes.ts";
import { createKeyScheme } from "../../src/hashing/key_scheme.ts";
import type { KeySchemeOptions } from "../../src/hashing/types.ts";
import { detectCandidates } from "../../src/hashing/detect_candidates.ts";

const TOKENS = Array.from({ length: 64 }, (_, i) => i + 1);
const MODEL = "Qwen/Qwen3-8B";

function firstKey(options: Partial<KeySchemeOptions>): string {
  return createKeyScheme({ hash: "sha256_cbor", chunkSize: 16, keyFormat: "llumnix", ...options })
    .keys(TOKENS)[0];
}

Deno.test("keyShape tells every preset's keys apart, whatever their options", () => {
  const cases: [Partial<KeySchemeOptions>, string][] = [
    [{}, "llumnix"],
    [{ hash: "sha256_hex", saveUnfullChunk: false }, "llumnix"], // bare {hex}
    [{ hash: "xxhash", seed: "1" }, "llumnix"],
    [{ keyFormat: "vllm-mooncake-store", model: MODEL }, "vllm-mooncake-store"],
    [
      { keyFormat: "vllm-mooncake-store", model: MODEL, group: 1, cachePrefix: "p" },
      "vllm-mooncake-store",
    ],
    [{ keyFormat: "lmcache", model: MODEL, dtype: "float16" }, "lmcache"],
    [
      { keyFormat: "lmcache", model: MODEL, dtype: "bfloat16", lmcacheTags: { user: "a" } },
      "lmcache",
    ],
    [{ keyFormat: "sglang-hicache", hash: "sha256_hex" }, "sglang-hicache"],
    [{ keyFormat: "sglang-hicache", hash: "sha256_hex", tag: "", model: MODEL }, "sglang-hicache"],
    [{ keyFormat: "sglang-hicache", hash: "sha256_hex", mla: true, ppSize: 2 }, "sglang-hicache"],
  ];
  for (const [options, shape] of cases) {
    const key = firstKey(options);
    assertEquals(keyShape(key), shape, key);
  }
  assertEquals(keyShape("some/other:key"), undefined);
});

Deno.test("shapeMismatch speaks only when the configured layout is absent and another is present", () => {
  const vllm = firstKey({ keyFormat: "vllm-mooncake-store", model: MODEL });
  const counts = countKeyShapes([vllm, vllm, "junk"]);
  assertEquals(counts, { "vllm-mooncake-store": 2 });
  assertMatch(shapeMismatch("llumnix", counts)!, /holds 2 vllm-mooncake-store key\(s\)/);
  assertEquals(shapeMismatch("vllm-mooncake-store", counts), undefined);
  assertEquals(shapeMismatch("llumnix", {}), undefined, "an empty store says nothing");
  assertEquals(shapeMismatch(undefined, counts), undefined, "a custom template: unknown");
});

Deno.test("detectCandidates lists each distinct key once, the configured scheme first", () => {
  const configured: KeySchemeOptions = {
    hash: "sha256",
    seed: "42",
    chunkSize: 128,
    keyFormat: "llumnix",
  };
  const prompt = Array.from({ length: 1024 }, (_, i) => i);
  const candidates = detectCandidates(configured, MODEL, [prompt]);
  assertEquals(candidates[0].options, configured);
  assertEquals(candidates[0].firstKeys, [createKeyScheme(configured).keys(prompt)[0]]);
  const keys = candidates.map((c) => c.firstKeys[0]);
  assertEquals(new Set(keys).size, keys.length);
  // Every candidate's first key is what createKeyScheme writes with its options.
  for (const c of candidates.filter((_, i) => i % 97 === 0)) {
    assertEquals(createKeyScheme(c.options).keys(prompt)[0], c.firstKeys[0]);
  }
  // Chunk sizes past the longest prompt are left out.
  assertEquals(
    detectCandidates(configured, MODEL, [prompt.slice(0, 20)])
      .every((c) => c.options.chunkSize === 16),
    true,
  );
});
