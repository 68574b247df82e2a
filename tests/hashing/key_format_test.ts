import { deepStrictEqual, throws } from "node:assert/strict";
import {
  createKeyFormatter,
  type KeyFormatOptions,
  keysFromHashes,
} from "../../src/hashing/key_scheme.ts";

const H = ["aa11", "bb22"];
const all = (options: KeyFormatOptions) =>
  createKeyFormatter({ ...options, requireAllRanks: true }).chunkKeys(H);

Deno.test("llumnix keys are {hex}_{tp_rank}; all ranks list the primary rank first", () => {
  deepStrictEqual(keysFromHashes(H, { keyFormat: "llumnix" }), ["aa11_0", "bb22_0"]);
  deepStrictEqual(all({ keyFormat: "llumnix", tpSize: 4, tpRank: 2 })[1], [
    "bb22_2",
    "bb22_0",
    "bb22_1",
    "bb22_3",
  ]);
});

Deno.test("chunkKeys is just the primary key per chunk unless requireAllRanks is set", () => {
  const f = createKeyFormatter({ keyFormat: "sglang-hicache", tpSize: 2 });
  deepStrictEqual(f.chunkKeys(H), [["aa11_0_k"], ["bb22_0_k"]]);
});

Deno.test("vllm-mooncake-store keys use the model basename and add cache prefix and group only when set", () => {
  const base = { keyFormat: "vllm-mooncake-store", model: "/models/Qwen/Qwen3-8B/" };
  deepStrictEqual(keysFromHashes(H, base)[0], "Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@aa11");
  deepStrictEqual(
    keysFromHashes(H, { ...base, cachePrefix: "prod", group: 0, tpSize: 2, tpRank: 1 })[0],
    "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0@aa11",
  );
});

Deno.test("vllm-mooncake-store requires every tp x pp rank, but only tp_rank:0 with MLA", () => {
  const base = { keyFormat: "vllm-mooncake-store", model: "m", tpSize: 2, ppSize: 2 };
  deepStrictEqual(all(base)[0], [
    "m@tp_rank:0@pcp0@dcp0@pp_rank:0@aa11",
    "m@tp_rank:0@pcp0@dcp0@pp_rank:1@aa11",
    "m@tp_rank:1@pcp0@dcp0@pp_rank:0@aa11",
    "m@tp_rank:1@pcp0@dcp0@pp_rank:1@aa11",
  ]);
  deepStrictEqual(all({ ...base, mla: true, tpRank: 1 })[0], [
    "m@tp_rank:0@pcp0@dcp0@pp_rank:0@aa11",
    "m@tp_rank:0@pcp0@dcp0@pp_rank:1@aa11",
  ]);
});

Deno.test("lmcache keys enumerate worker ids, and MLA collapses them to world size 1, worker 0", () => {
  const base = { keyFormat: "lmcache", model: "Qwen/Qwen3-8B", dtype: "bfloat16", worldSize: 2 };
  deepStrictEqual(all(base)[0], [
    "Qwen/Qwen3-8B@2@0@aa11@bfloat16",
    "Qwen/Qwen3-8B@2@1@aa11@bfloat16",
  ]);
  deepStrictEqual(all({ ...base, mla: true })[0], ["Qwen/Qwen3-8B@1@0@aa11@bfloat16"]);
  deepStrictEqual(
    keysFromHashes(H, { ...base, tpSize: 2, worldSize: undefined, workerId: 1 })[0],
    "Qwen/Qwen3-8B@2@1@aa11@bfloat16",
  );
});

Deno.test("sglang-hicache keys carry tag and dashed model prefixes and _k/_v for every rank", () => {
  const base = { keyFormat: "sglang-hicache", model: "Qwen/Qwen3-8B", tag: "t1" };
  deepStrictEqual(keysFromHashes(H, base)[0], "t1_Qwen-Qwen3-8B_aa11_0_k");
  deepStrictEqual(keysFromHashes(H, { keyFormat: "sglang-hicache" })[0], "aa11_0_k");
  deepStrictEqual(all({ ...base, tpSize: 2 })[0], [
    "t1_Qwen-Qwen3-8B_aa11_0_k",
    "t1_Qwen-Qwen3-8B_aa11_0_v",
    "t1_Qwen-Qwen3-8B_aa11_1_k",
    "t1_Qwen-Qwen3-8B_aa11_1_v",
  ]);
  deepStrictEqual(all({ keyFormat: "sglang-hicache", ppSize: 2, ppRank: 1 })[0], [
    "aa11_0_1_k",
    "aa11_0_0_k",
    "aa11_0_0_v",
    "aa11_0_1_v",
  ]);
});

Deno.test("sglang-hicache MLA keys are {hex}__k without PP and {hex}_{pp}_k with PP, one per pp rank", () => {
  deepStrictEqual(all({ keyFormat: "sglang-hicache", mla: true, tpSize: 4 })[0], ["aa11__k"]);
  deepStrictEqual(all({ keyFormat: "sglang-hicache", mla: true, ppSize: 2 })[0], [
    "aa11_0_k",
    "aa11_1_k",
  ]);
});

Deno.test("a custom template fills every placeholder and expands the ranks it mentions", () => {
  const f = createKeyFormatter({
    keyFormat: "{model_basename}|{model_dashed}|{model}|{dtype}|{tag}|{cache_prefix}|{group}|" +
      "{tp_size}x{pp_size}/{world_size}|w{worker_id}|{i}|{hex}",
    model: "org/name",
    dtype: "fp8",
    tag: "T",
    cachePrefix: "P",
    group: 3,
    tpSize: 2,
  });
  deepStrictEqual(f.keys(H), [
    "name|org-name|org/name|fp8|T|P|3|2x1/2|w0|0|aa11",
    "name|org-name|org/name|fp8|T|P|3|2x1/2|w0|1|bb22",
  ]);
  deepStrictEqual(
    all({ keyFormat: "{hex}-{tp_rank}-{pp_rank}", tpSize: 2, ppSize: 2, ppRank: 1 })[1],
    [
      "bb22-0-1",
      "bb22-0-0",
      "bb22-1-0",
      "bb22-1-1",
    ],
  );
});

Deno.test("key format errors name the option to fix and list every problem at once", () => {
  throws(
    () => createKeyFormatter({ keyFormat: "lmcach" }),
    /neither a preset .* nor a template containing \{hex\}/,
  );
  throws(() => createKeyFormatter({ keyFormat: "{hex}_{rank}" }), /unknown placeholder \{rank\}/);
  throws(
    () => createKeyFormatter({ keyFormat: "{model}@{hex}" }),
    /uses \{model\} but option model is not set/,
  );
  throws(() => createKeyFormatter({ keyFormat: "vllm-mooncake-store" }), /needs model/);
  throws(() => createKeyFormatter({ keyFormat: "lmcache", model: "m" }), /needs dtype/);
  throws(() => createKeyFormatter({ keyFormat: "{hex},x" }), /comma/);
  throws(
    () => createKeyFormatter({ keyFormat: "llumnix", tpRank: 2, tpSize: 2 }),
    /tpRank \(2\) must be < tpSize \(2\)/,
  );
  throws(
    () =>
      createKeyFormatter({
        keyFormat: "llumnix",
        tpSize: 0,
        ppRank: -1,
        mla: "yes" as unknown as boolean,
      }),
    (e: Error) =>
      /tpSize must be an integer >= 1/.test(e.message) &&
      /ppRank must be an integer >= 0/.test(e.message) &&
      /mla must be true or false/.test(e.message),
  );
});
