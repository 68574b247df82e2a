/** `kv.extraKeys` (vLLM's LoRA / cache_salt layout) and the LoRA `path` it needs. */
import { assert, assertEquals } from "../assert.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createKeyScheme, keySchemeOptionsFromKv } from "../../src/hashing/key_scheme.ts";
import { problemsOf } from "./config_problems.ts";

const model = (fields: Record<string, unknown>) => ({
  name: "m",
  tokenizer: { mode: "none" },
  instances: [{ id: "a", url: "http://127.0.0.1:8001" }],
  ...fields,
});

Deno.test('kv.extraKeys defaults to "tagged" (vLLM 0.31.0+) and reaches the key scheme', () => {
  for (const [kv, expected] of [[{}, "tagged"], [{ extraKeys: "plain" }, "plain"]] as const) {
    const config = resolveConfig({ models: [model({ kv: { store: "none", ...kv } })] });
    const { kv: block } = config.models[0];
    assertEquals(block.extraKeys, expected);
    assertEquals(keySchemeOptionsFromKv(block, "m").extraKeys, expected);
    assertEquals(createKeyScheme(keySchemeOptionsFromKv(block, "m")).options.extraKeys, expected);
  }
});

Deno.test("kv.extraKeys takes only tagged / plain, with a suggestion for a typo", () => {
  const problems = problemsOf({ models: [model({ kv: { store: "none", extraKeys: "taged" } })] });
  assertEquals(problems.length, 1);
  assert(problems[0].startsWith("models[0].kv.extraKeys: "), problems[0]);
  assert(problems[0].endsWith('(did you mean "tagged"?)'), problems[0]);
});

Deno.test("a LoRA's path is optional and, when given, not empty", () => {
  const loras = [{ name: "bot", adapter: "bot-v2", path: "/models/bot-v2" }, {
    name: "old",
    adapter: "old-v1",
  }];
  const config = resolveConfig({ models: [model({ kv: { store: "none" }, loras })] });
  assertEquals(config.models[0].loras, loras);
  const empty = problemsOf({
    models: [model({ kv: { store: "none" }, loras: [{ name: "x", adapter: "y", path: "" }] })],
  });
  assertEquals(empty.length, 1);
  assert(empty[0].startsWith("models[0].loras[0].path: "), empty[0]);
});
