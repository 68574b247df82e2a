import { assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { poolLoadsOf } from "../../src/config/pool_loads.ts";

function kvOf(kv: Record<string, unknown>) {
  const config = resolveConfig({
    models: [{
      name: "m",
      tokenizer: { mode: "none" },
      kv: { store: "mooncake", url: "http://127.0.0.1:50088", ...kv },
      instances: [{ id: "a", url: "http://127.0.0.1:8001" }],
    }],
  });
  return config.models[0].kv;
}

Deno.test("kv.poolLoads unset follows the key format: on for connectors that load from the store themselves", () => {
  assertEquals(poolLoadsOf(kvOf({})), false, "llumnix keys");
  assertEquals(poolLoadsOf(kvOf({ keyFormat: "{hex}" })), false, "a custom template");
  const vllm = { keyFormat: "vllm-mooncake-store", keyParams: { model: "m" } };
  assertEquals(poolLoadsOf(kvOf(vllm)), true);
  const lmcache = {
    keyFormat: "lmcache",
    keyParams: { model: "m", dtype: "bfloat16", worldSize: 1 },
  };
  assertEquals(poolLoadsOf(kvOf(lmcache)), true);
  assertEquals(poolLoadsOf(kvOf({ keyFormat: "sglang-hicache" })), true);
});

Deno.test("kv.poolLoads set wins over the key format either way", () => {
  const vllm = { keyFormat: "vllm-mooncake-store", keyParams: { model: "m" } };
  assertEquals(poolLoadsOf(kvOf({ ...vllm, poolLoads: false })), false);
  assertEquals(poolLoadsOf(kvOf({ poolLoads: true })), true);
});
