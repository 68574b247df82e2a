import { deepStrictEqual, ok, strictEqual } from "node:assert/strict";
import {
  batchQueryUrl,
  encodeStoreKey,
  isPlainStoreKey,
  splitIntoBatches,
  storeKeyProblem,
} from "../../src/kv/mooncake_request.ts";

Deno.test("encodeStoreKey() sends every preset's key shape unescaped", () => {
  const keys = [
    "4e1195df2e61c3e0_0",
    "Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@abcdef",
    "Qwen/Qwen3-8B@1@0@abcdef@bfloat16",
    "tag_Qwen-Qwen3-8B_abcdef_0_k",
    "a.b~c",
  ];
  for (const key of keys) {
    strictEqual(isPlainStoreKey(key), true, key);
    strictEqual(encodeStoreKey(key), key);
  }
});

Deno.test("encodeStoreKey() percent-encodes keys with any other character", () => {
  strictEqual(encodeStoreKey("my model@abc"), "my%20model%40abc");
  strictEqual(encodeStoreKey("a+b"), "a%2Bb");
  strictEqual(encodeStoreKey("a%b"), "a%25b");
  strictEqual(encodeStoreKey("a&b=c#d"), "a%26b%3Dc%23d");
  strictEqual(encodeStoreKey("modèle"), "mod%C3%A8le");
  strictEqual(isPlainStoreKey("a b"), false);
});

Deno.test("storeKeyProblem() rejects commas and empty keys with a fix to apply", () => {
  strictEqual(storeKeyProblem("fine_0"), undefined);
  const comma = storeKeyProblem("a,b");
  ok(comma?.includes("comma") && comma.includes("key preset"), comma);
  ok(storeKeyProblem("")?.includes("empty"));
});

Deno.test("batchQueryUrl() joins keys with raw commas under the base URL", () => {
  strictEqual(
    batchQueryUrl("http://m:9003/", ["a_0", "b c"]),
    "http://m:9003/batch_query_keys?keys=a_0,b%20c",
  );
  strictEqual(batchQueryUrl("http://m:9003", ["x"]), "http://m:9003/batch_query_keys?keys=x");
});

Deno.test("splitIntoBatches() cuts 300 keys into 128 + 128 + 44 in order", () => {
  const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
  const batches = splitIntoBatches(keys, 128);
  deepStrictEqual(batches.map((b) => b.length), [128, 128, 44]);
  deepStrictEqual(batches.flat(), keys);
  deepStrictEqual(splitIntoBatches([], 128), []);
  deepStrictEqual(splitIntoBatches([1, 2], 0), [[1], [2]]);
});
